"""Retries with backoff: 429 and 5xx from a real filter on the live server, a loopback server, a closed port."""
import json
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from agents.chain import Continue, Error, Filter, registered_temporarily
from knowhub_client import ConnectionFailed, KnowHub, RateLimited, RetryPolicy, ServerError


def failing_first(operation: str, times: int, status: int):
    """A pre_invocation filter like examples/filters.py RATE_LIMIT: refuses the first `times` calls of `operation`."""
    seen = []

    def handler(ctx):
        if ctx["operation"] != operation:
            return Continue(ctx)
        seen.append(ctx["operation"])
        if len(seen) <= times:
            return Error(f"busy ({len(seen)})", status=status, code="rate_limited" if status == 429 else "busy")
        return Continue(ctx)

    return Filter(f"fail_first_{operation}", "pre_invocation", handler, priority=-10), seen


@pytest.mark.parametrize("status", [429, 503])
def test_a_search_is_retried_through_429_and_503_until_it_succeeds(hub, status):
    refuse, seen = failing_first("knowledge_search", times=2, status=status)
    with registered_temporarily(refuse):
        assert hub.knowledge_search("anything")["count"] == 0
    assert len(seen) == 3


def test_retries_give_up_with_the_servers_message(hub_for):
    hub = hub_for(retry=RetryPolicy(retries=2, backoff=0.01))
    refuse, seen = failing_first("knowledge_list", times=10, status=429)
    with registered_temporarily(refuse), pytest.raises(RateLimited, match="busy") as exc:
        hub.knowledge_list()
    assert len(seen) == 3 and exc.value.code == "rate_limited"


def test_a_save_is_retried_with_its_idempotency_key_and_stored_once(hub):
    refuse, seen = failing_first("knowledge_save", times=1, status=503)
    with registered_temporarily(refuse):
        hub.knowledge_save("t", "c", ["tool"])
    assert len(seen) == 2 and hub.knowledge_list()["count"] == 1


def test_feedback_is_retried_with_its_idempotency_key_and_counted_once(hub):
    item = hub.knowledge_save("t", "c", ["tool"])
    refuse, seen = failing_first("knowledge_update", times=1, status=503)
    with registered_temporarily(refuse):
        assert hub.knowledge_update(item["id"], add_helpful_case={"outcome": "ok"})["eval"]["helpful"] == 1
    # the reply of the first attempt was lost after the write: the retry replays it
    report = {"add_helpful_case": {"outcome": "again"}}
    first = hub.knowledge_update(item["id"], **report, idempotency_key="lost-reply")
    assert hub.knowledge_update(item["id"], **report, idempotency_key="lost-reply") == first
    assert len(seen) == 2 and hub.knowledge_get(item["id"])["eval"]["helpful"] == 2


def test_a_batch_of_reports_is_retried_with_its_key_and_each_counted_once(hub):
    item = hub.knowledge_save("t", "c", ["tool"])
    refuse, seen = failing_first("knowledge_batch_update", times=1, status=503)
    with registered_temporarily(refuse):
        hub.knowledge_batch_update([{"knowledge_id": item["id"], "is_helpful": False, "case": {"outcome": "x"}}])
    assert len(seen) == 2 and hub.knowledge_get(item["id"])["eval"]["harmful"] == 1


def test_slim_is_not_idempotent_so_it_is_never_sent_twice(hub):
    refuse, seen = failing_first("knowledge_slim", times=1, status=503)
    with registered_temporarily(refuse), pytest.raises(ServerError, match="busy"):
        hub.knowledge_slim(dry_run=True)
    assert len(seen) == 1


class Flaky:
    """A loopback HTTP server answering from a script of (status, headers, body); `requests` holds each
    (method, raw path). A callable body writes the reply's body itself (after the headers), e.g. slowly."""

    def __init__(self, script):
        self.script, self.hits, self.requests = list(script), [], []
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                flaky.hits.append((time.monotonic(), self.headers.get("Authorization")))
                flaky.requests.append((self.command, self.path))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, body = flaky.script.pop(0) if flaky.script else (200, {}, {"results": [], "count": 0})
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if callable(body):
                    self.end_headers()
                    try:
                        body(self.wfile)
                    except OSError:  # the client gave up
                        pass
                    return
                data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) \
                    else json.dumps(body).encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_retry_after_is_honoured_and_plain_text_errors_are_readable():
    flaky = Flaky([(503, {"Retry-After": "0.3"}, "upstream down"), (200, {}, {"results": [], "count": 0, "next": None})])
    try:
        with KnowHub(flaky.url, token="kh_x", retry=RetryPolicy(retries=1, backoff=0.01)) as hub:
            assert hub.knowledge_list()["count"] == 0
        (first, auth), (second, _) = flaky.hits
        assert second - first >= 0.29 and auth == "Bearer kh_x"

        flaky.script = [(502, {}, "bad gateway")] * 2
        with KnowHub(flaky.url, retry=RetryPolicy(retries=1, backoff=0.01)) as hub, \
                pytest.raises(ServerError, match="bad gateway") as exc:
            hub.knowledge_list()
        assert exc.value.status == 502
    finally:
        flaky.close()


def test_a_closed_port_is_retried_with_backoff_then_connection_failed():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    with KnowHub(f"http://127.0.0.1:{port}", retry=RetryPolicy(retries=2, backoff=0.1)) as hub, \
            pytest.raises(ConnectionFailed, match="ConnectError"):
        hub.knowledge_save("t", "c", ["tool"])  # never sent, so even a write may be retried
    assert time.monotonic() - started >= 0.15  # two backoffs: at least 0.05 + 0.1


def test_the_async_client_retries_503_then_gives_up_on_a_closed_port():
    import asyncio

    from knowhub_client import AsyncKnowHub

    flaky = Flaky([(503, {}, {"error": {"code": "busy", "message": "busy", "fields": {}}})])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]

    async def scenario():
        async with AsyncKnowHub(flaky.url, retry=RetryPolicy(retries=1, backoff=0.01)) as hub:
            assert (await hub.knowledge_list())["count"] == 0
        async with AsyncKnowHub(f"http://127.0.0.1:{closed}", retry=RetryPolicy(retries=1, backoff=0.01)) as hub:
            with pytest.raises(ConnectionFailed):
                await hub.knowledge_search("x")

    try:
        asyncio.run(scenario())
        assert len(flaky.hits) == 2
    finally:
        flaky.close()


@pytest.mark.parametrize("value", ["-5", "nan", "NaN", "inf", "-inf", "1e999", "soon", "0x10", "", " ",
                                   "Wed, 99 Foo 2026"])
def test_junk_retry_after_is_ignored_for_the_clients_own_backoff(value):
    policy = RetryPolicy(backoff=0.4, max_backoff=8.0)
    for attempt in range(3):
        delay = policy.delay(attempt, httpx.Response(503, headers={"Retry-After": value}))
        assert 0.2 * 2 ** attempt <= delay <= 0.4 * 2 ** attempt


def test_retry_after_in_seconds_or_as_an_http_date_is_clamped_and_never_negative():
    from email.utils import format_datetime

    policy = RetryPolicy(backoff=0.4, max_backoff=8.0)

    def delay(value):
        return policy.delay(0, httpx.Response(429, headers={"Retry-After": value}))

    assert delay("2") == 2.0 and delay("0") == 0.0 and delay("86400") == delay("9" * 40) == 8.0
    now = datetime.now(timezone.utc)
    assert delay(format_datetime(now - timedelta(hours=1), usegmt=True)) == 0.0  # already past: now
    assert delay(format_datetime(now + timedelta(hours=1), usegmt=True)) == 8.0
    assert 25 <= RetryPolicy(max_backoff=60).delay(0, httpx.Response(
        503, headers={"Retry-After": format_datetime(now + timedelta(seconds=30), usegmt=True)})) <= 30


def test_a_negative_nan_or_endless_retry_after_neither_crashes_nor_stalls_the_client():
    flaky = Flaky([(503, {"Retry-After": "-1"}, "busy"), (503, {"Retry-After": "nan"}, "busy"),
                   (429, {"Retry-After": "1e999"}, "busy")])
    try:
        started = time.monotonic()
        with KnowHub(flaky.url, retry=RetryPolicy(retries=3, backoff=0.01, max_backoff=0.05)) as hub:
            assert hub.knowledge_list()["count"] == 0
        assert len(flaky.hits) == 4 and time.monotonic() - started < 1
    finally:
        flaky.close()


def test_the_deadline_stops_retrying_when_the_next_wait_would_pass_it():
    flaky = Flaky([(503, {"Retry-After": "1"}, "busy")] * 10)
    try:
        started = time.monotonic()
        with KnowHub(flaky.url, retry=RetryPolicy(retries=10, max_backoff=1), deadline=1.5) as hub, \
                pytest.raises(ServerError, match="busy"):
            hub.knowledge_list()
        assert len(flaky.hits) == 2 and time.monotonic() - started < 1.4  # the third try would start at 2 s
    finally:
        flaky.close()


def test_the_deadline_bounds_a_closed_ports_retries():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    with KnowHub(f"http://127.0.0.1:{port}", retry=RetryPolicy(retries=50, backoff=0.1, max_backoff=0.1),
                 deadline=0.5) as hub, pytest.raises(ConnectionFailed):
        hub.knowledge_search("x")
    assert time.monotonic() - started < 0.8


def trickle(wfile):
    """A reply body one byte every 0.1 s (of the 1000 its Content-Length promises): no read ever times out."""
    for _ in range(20):
        wfile.write(b" ")
        wfile.flush()
        time.sleep(0.1)


def test_the_deadline_cuts_a_reply_that_trickles_in_sync_and_async():
    import asyncio

    from knowhub_client import AsyncKnowHub

    flaky = Flaky([(200, {"Content-Length": "1000"}, trickle)] * 4)
    retry = RetryPolicy(retries=3, backoff=0.01)
    try:
        started = time.monotonic()
        with KnowHub(flaky.url, timeout=5, deadline=0.5, retry=retry) as hub, \
                pytest.raises(ConnectionFailed, match="deadline"):
            hub.knowledge_list()
        assert time.monotonic() - started < 1.2 and len(flaky.hits) == 1

        async def scenario():
            async with AsyncKnowHub(flaky.url, timeout=5, deadline=0.5, retry=retry) as hub:
                with pytest.raises(ConnectionFailed, match="deadline"):
                    await hub.knowledge_list()

        started = time.monotonic()
        asyncio.run(scenario())
        assert time.monotonic() - started < 1.2
    finally:
        flaky.close()


def test_every_client_has_a_deadline_by_default():
    from knowhub_client import AsyncKnowHub

    with KnowHub("http://127.0.0.1:9") as hub:
        assert 0 < hub.deadline <= 300
    assert AsyncKnowHub("http://127.0.0.1:9").deadline == hub.deadline


def test_a_write_the_server_rolled_back_as_a_collision_is_retried_even_when_not_idempotent():
    collided = (503, {"Retry-After": "0"}, {"error": {"code": "write_conflict", "message": "nothing was written: retry",
                                                      "fields": {}}})
    job = {"job": {"id": "00000000-0000-0000-0000-000000000001", "status": "queued"}}
    flaky = Flaky([collided, (202, {}, job)])
    try:
        with KnowHub(flaky.url, retry=RetryPolicy(retries=2, backoff=0.01)) as hub:
            assert hub.knowledge_slim(dry_run=True) == job
        assert [method for method, _ in flaky.requests] == ["POST", "POST"]

        flaky.script, flaky.requests = [(503, {}, {"error": {"code": "unavailable", "message": "down", "fields": {}}})], []
        with KnowHub(flaky.url, retry=RetryPolicy(retries=2, backoff=0.01)) as hub, pytest.raises(ServerError):
            hub.knowledge_slim(dry_run=True)  # it may have been queued: never twice
        assert len(flaky.requests) == 1
    finally:
        flaky.close()
