"""Retries with backoff: 429 and 5xx from a real filter on the live server, a loopback server, a closed port."""
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


def test_feedback_is_not_idempotent_so_it_is_never_sent_twice(hub):
    item = hub.knowledge_save("t", "c", ["tool"])
    refuse, seen = failing_first("knowledge_update", times=1, status=503)
    with registered_temporarily(refuse), pytest.raises(ServerError, match="busy"):
        hub.knowledge_update(item["id"], add_helpful_case={"outcome": "ok"})
    assert len(seen) == 1


class Flaky:
    """A loopback HTTP server answering from a script of (status, headers, body)."""

    def __init__(self, script):
        self.script, self.hits = list(script), []
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                flaky.hits.append((time.monotonic(), self.headers.get("Authorization")))
                status, headers, body = flaky.script.pop(0) if flaky.script else (200, {}, {"results": [], "count": 0})
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

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
