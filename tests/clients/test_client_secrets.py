"""Secrets the client holds (a token, a passphrase, an idempotency key, a password in the URL) never reach a message,
a log line or the model, and a header HTTP cannot carry is refused by name, not sent, retried or echoed."""
import json
import socket
import time

import httpx
import pytest

from knowhub_client import (
    AsyncKnowHub, ConnectionFailed, InvalidArgument, KnowHub, KnowHubError, RetryPolicy, tools,
)
from knowhub_client._transport import Call, connection_failed, retry_after_error
from tests.clients.test_client_retries import Flaky

SECRET = "kh_S3CRET"


@pytest.fixture
def flaky():
    server = Flaky([])
    yield server
    server.close()


def test_a_token_read_from_a_file_loses_its_newline(flaky):
    with KnowHub(flaky.url, token=f"  {SECRET}\n", retry=RetryPolicy(retries=0)) as hub:
        hub.knowledge_list()
    assert flaky.hits[0][1] == f"Bearer {SECRET}"


@pytest.mark.parametrize("token", [f"{SECRET}\r\nX-Evil: 1", f"{SECRET}\nrest", f"{SECRET}\x00", f"{SECRET}ü",
                                   f"{SECRET}\ud800"])
@pytest.mark.parametrize("client", [KnowHub, AsyncKnowHub])
def test_a_token_http_cannot_carry_is_refused_when_the_client_is_built_without_echoing_it(client, token):
    with pytest.raises(InvalidArgument) as refused:
        client("http://127.0.0.1:9", token=token)
    assert refused.value.argument == "token" and SECRET not in str(refused.value) and SECRET not in repr(refused.value)
    assert isinstance(refused.value, ValueError)


@pytest.mark.parametrize("call, argument", [
    (lambda hub: hub.knowledge_export(passphrase=f"{SECRET}\npassphrase"), "passphrase"),
    (lambda hub: hub.knowledge_export(passphrase=f"{SECRET} "), "passphrase"),
    (lambda hub: hub.knowledge_save("t", "c", ["tool"], idempotency_key=f"{SECRET}\r\n"), "idempotency_key"),
    (lambda hub: hub.knowledge_save("t", "c", ["tool"], idempotency_key=f"{SECRET}-ü"), "idempotency_key"),
    (lambda hub: hub.knowledge_bulk_save([], idempotency_key=f"{SECRET}\x00"), "idempotency_key"),
    (lambda hub: hub.resource_save("r", "t", idempotency_key=f"{SECRET}\n"), "idempotency_key"),
])
def test_a_header_argument_http_cannot_carry_is_refused_by_name_before_any_request(flaky, call, argument):
    with KnowHub(flaky.url, token="kh_x", retry=RetryPolicy(retries=3, backoff=1)) as hub:
        with pytest.raises(InvalidArgument) as refused:
            call(hub)
    assert refused.value.argument == argument and SECRET not in str(refused.value)
    assert flaky.requests == []


def test_a_utf8_passphrase_is_still_sent(flaky):
    flaky.script = [(200, {"Content-Type": "application/x-ndjson"}, '{"kind": "knowhub-export"}\n')]
    with KnowHub(flaky.url, token="kh_x") as hub:
        assert hub.knowledge_export(passphrase="pässwört mit Leerzeichen") == [{"kind": "knowhub-export"}]


def test_a_request_http_cannot_carry_is_neither_retried_nor_shown_nor_chained(flaky):
    """Whatever slips past the checks: h11's LocalProtocolError holds the header's value in its text."""
    with KnowHub(flaky.url, token="kh_x", retry=RetryPolicy(retries=3, backoff=1)) as hub:
        hub._http.headers["Authorization"] = f"Bearer {SECRET}\n"
        started = time.monotonic()
        with pytest.raises(KnowHubError) as failed:
            hub.knowledge_search("x")
        assert time.monotonic() - started < 0.9  # no backoff: not retried
        _, dispatch = tools(hub)
        reply = dispatch({"name": "knowledge_search", "arguments": '{"query": "x"}'})
    assert not isinstance(failed.value, ConnectionFailed) and failed.value.code == "invalid_request"
    assert SECRET not in str(failed.value) and failed.value.__cause__ is None and failed.value.__suppress_context__
    assert SECRET not in reply and json.loads(reply)["error"]["code"] == "invalid_request"
    assert flaky.requests == []


def test_local_protocol_errors_are_no_connection_failures():
    exc = httpx.LocalProtocolError(f"Illegal header value b'Bearer {SECRET}\\n'")
    call = Call("GET", "/api/knowledge", idempotent=True)
    assert retry_after_error(call, exc, 0, RetryPolicy()) is None
    failure = connection_failed(call, exc, "http://h")
    assert not isinstance(failure, ConnectionFailed) and SECRET not in str(failure)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_password_in_the_base_url_is_redacted_in_every_message(flaky, tmp_path):
    with KnowHub(f"http://user:{SECRET}@127.0.0.1:{closed_port()}", retry=RetryPolicy(retries=0)) as hub:
        with pytest.raises(ConnectionFailed) as unreachable:
            hub.knowledge_list()
    assert SECRET not in str(unreachable.value) and "user:***@127.0.0.1" in str(unreachable.value)

    base = flaky.url.replace("http://", f"http://user:{SECRET}@")
    flaky.script = [(200, {"Content-Type": "text/plain"}, "OK"), (200, {}, {"pad": "x" * 5000}),
                    (200, {"Content-Type": "text/html"}, "<html>Sign in</html>"), (200, {}, [1])]
    with KnowHub(base, retry=RetryPolicy(retries=0)) as hub:
        hub.max_response_bytes = 4096
        for call in (hub.knowledge_list, hub.knowledge_list, hub.knowledge_export, hub.knowledge_list):
            with pytest.raises(KnowHubError) as failed:
                call()
            assert SECRET not in str(failed.value) and "***" in str(failed.value), str(failed.value)
