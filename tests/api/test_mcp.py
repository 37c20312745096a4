"""The MCP server, driven by the official `mcp` SDK's own clients: stdio (manage.py mcp) and streamable HTTP (/mcp)."""
import json
import os
import subprocess
import sys
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from agents import operations
from agents.models import AuditEvent
from knowledge.models import Knowledge
from tests.callers import agent_key
from tests.conftest import REPO_ROOT, database_url_for_subprocess
from tests.stack import asgi_server as asgi_server_at

pytestmark = pytest.mark.django_db(transaction=True)

SEED_TOOLS = {"knowledge_search", "knowledge_save", "knowledge_get", "knowledge_update", "knowledge_batch_update",
              "knowledge_list", "knowledge_slim", "resource_save", "resource_get", "job_get"}


def subprocess_env() -> dict:
    return {**os.environ, "DATABASE_URL": database_url_for_subprocess(),
            "DJANGO_SETTINGS_MODULE": "knowhub_site.test_settings", "PYTHONUNBUFFERED": "1"}


def token(agent_id="research_agent", scopes=("org:acme",), **kwargs) -> str:
    return agent_key(agent_id, scopes, **kwargs)


async def call(session: ClientSession, name: str, **arguments):
    """(is_error, the JSON the tool answered)."""
    result = await session.call_tool(name, arguments)
    return result.is_error, json.loads(result.content[0].text)


@asynccontextmanager
async def stdio_session(raw_token: str):
    params = StdioServerParameters(command=sys.executable, args=["manage.py", "mcp", "--token", raw_token],
                                   env=subprocess_env(), cwd=str(REPO_ROOT))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def exercise(session: ClientSession) -> None:
    """Every tool once, as an agent would; the same checks for both transports."""
    tools = {t.name for t in (await session.list_tools()).tools}
    assert SEED_TOOLS <= tools and tools == set(operations.registered())  # every registered operation, no other

    error, saved = await call(session, "knowledge_save", task="Log in to site A", content="Use the test account",
                              types=["tool"], tags={"domain": "web"}, resource_ids=[])
    assert not error and saved["owner"] == "agent:research_agent" and saved["scopes"] == ["org:acme"]
    error, found = await call(session, "knowledge_search", query="site A login",
                              filters={"op": "EQ", "key": "tags.domain", "value": "web"})
    assert not error and [r["id"] for r in found["results"]] == [saved["id"]]
    assert 0.0 < found["results"][0]["relevance"] <= 1.0
    error, nothing = await call(session, "knowledge_search", query="zzqxv sourdough byzantine", rank="relevance")
    assert not error and nothing["results"] == [] and nothing["count"] == 0  # nothing here answers it
    error, closed = await call(session, "knowledge_search", query="site A login", answer_floor=1.0)
    assert not error and closed["results"] == []  # the gate's thresholds are set per request: none reaches 1.0
    _, got = await call(session, "knowledge_get", knowledge_id=saved["id"])
    assert got == saved
    _, updated = await call(session, "knowledge_update", knowledge_id=saved["id"], add_helpful_case={"outcome": "ok"})
    assert updated["eval"]["helpful"] == 1
    _, batch = await call(session, "knowledge_batch_update",
                          feedback_list=[{"knowledge_id": saved["id"], "is_helpful": False}])
    assert batch["succeeded"] == 1
    _, listed = await call(session, "knowledge_list", limit=5, types=["tool"])
    assert listed["count"] == 1 and listed["results"][0]["eval"]["harmful"] == 1
    error, edited = await call(session, "knowledge_edit", knowledge_id=saved["id"], content="Use the QA account",
                               reason="the test account was retired")
    assert not error and edited["content"] == "Use the QA account" and edited["task"] == saved["task"]
    error, filters = await call(session, "knowledge_filters")
    assert not error and filters["keys"]["tags.domain"]["samples"] == ["web"]
    _, resource = await call(session, "resource_save", id="credentials/site_a", title="site A",
                             secure_body="pw-123", content_type="credential")
    assert resource["has_secret"] and "secure_body" not in resource
    _, revealed = await call(session, "resource_get", id="credentials/site_a", reveal=True)
    assert revealed["secure_body"] == "pw-123"

    error, bad = await call(session, "knowledge_save", task="t", content="c", types=["gossip"])
    assert error and bad["error"]["status"] == 400 and "types" in bad["error"]["fields"]
    error, missing = await call(session, "knowledge_get", knowledge_id="knowledge-20990101-zzzz")
    assert error and missing["error"]["status"] == 404
    error, forbidden = await call(session, "knowledge_save", task="t", content="c", types=["tool"], scopes=["org:other"])
    assert error and forbidden["error"]["status"] == 403
    error, no_llm = await call(session, "knowledge_slim")
    assert error and no_llm["error"]["code"] == "llm_not_configured"
    error, no_job = await call(session, "job_get", job_id="00000000-0000-0000-0000-000000000000")
    assert error and no_job["error"]["status"] == 404

    # arguments are refused as REST refuses fields: a misspelt one no longer runs the search with the defaults
    error, typo = await call(session, "knowledge_search", query="site A login", topk=1)
    assert error and typo["error"]["status"] == 400 and typo["error"]["code"] == "invalid"
    assert list(typo["error"]["fields"]) == ["topk"] and typo["error"]["message"].startswith("topk: unknown field")
    assert "top_k" in typo["error"]["message"]  # what it takes
    error, wrong = await call(session, "knowledge_search", query="site A login", top_k="many")
    assert error and wrong["error"]["status"] == 400 and list(wrong["error"]["fields"]) == ["top_k"]
    for argument, value in (("top_k", True), ("top_k", "5"), ("top_k", 5.0), ("answer_floor", "0.5"),
                            ("answer_floor", False), ("include_superseded", "yes"), ("include_superseded", 1)):
        error, coerced = await call(session, "knowledge_search", query="site A login", **{argument: value})
        assert error and coerced["error"]["status"] == 400, (argument, value, coerced)
        assert list(coerced["error"]["fields"]) == [argument], (argument, value, coerced)
    error, fine = await call(session, "knowledge_search", query="site A login", top_k=2, answer_floor=0, scopes=None)
    assert not error, fine
    for conflict_id, status in (("999999", 403), (True, 400), ("1.0", 400)):  # digits pass to the permission check
        error, missing = await call(session, "conflict_get", conflict_id=conflict_id)
        assert error and missing["error"]["status"] == status, (conflict_id, missing)
    error, nested = await call(session, "knowledge_batch_update", feedback_list=["not an object"])
    assert error and nested["error"]["status"] == 400 and list(nested["error"]["fields"]) == ["feedback_list.0"]
    error, absent = await call(session, "knowledge_get")
    assert error and absent["error"]["status"] == 400 and list(absent["error"]["fields"]) == ["knowledge_id"]


def test_stdio_server_runs_every_tool_through_the_same_operations_as_rest():
    raw = token(can_read_secrets=True)

    async def scenario():
        async with stdio_session(raw) as session:
            await exercise(session)

    anyio.run(scenario)
    assert Knowledge.objects.count() == 1
    # the chain's audit filter saw the MCP writes, exactly as it sees REST ones
    assert {"knowledge_save", "knowledge_update", "knowledge_batch_update", "resource_save"} <= set(
        AuditEvent.objects.values_list("operation", flat=True))


def test_stdio_server_sees_only_the_tokens_scopes():
    Knowledge.objects.all().delete()
    outsider = token(agent_id="spy", scopes=("org:other",))
    owner = token()

    async def scenario():
        async with stdio_session(owner) as session:
            _, saved = await call(session, "knowledge_save", task="secret plan", content="c", types=["plan"])
        async with stdio_session(outsider) as session:
            _, found = await call(session, "knowledge_search", query="secret plan")
            assert found["count"] == 0
            error, hidden = await call(session, "knowledge_get", knowledge_id=saved["id"])
            assert error and hidden["error"]["status"] == 404

    anyio.run(scenario)


def test_a_tools_refusal_names_the_tools_argument_not_the_apis_field():
    """Found by the 50-client sweep: knowledge_search's `query` was refused as `q`, knowledge_save's `urls` as
    `source.urls.0`."""
    raw = token()

    async def scenario():
        async with stdio_session(raw) as session:
            error, long = await call(session, "knowledge_search", query="x" * 5000)
            assert error and long["error"]["message"].startswith("query: ") and "query" in long["error"]["fields"]
            error, link = await call(session, "knowledge_save", task="t", content="c", types=["tool"],
                                     urls=["ftp://x.example"])
            assert error and link["error"]["message"].startswith("urls.0: "), link
            error, sure = await call(session, "knowledge_save", task="t", content="c", types=["tool"], confidence=7)
            assert error and sure["error"]["message"].startswith("confidence: "), sure
            error, kind = await call(session, "knowledge_save", task="t", content="c", types=["nonsense"])
            assert error and kind["error"]["message"].startswith("types"), kind  # not renamed: the same name

    anyio.run(scenario)


def test_stdio_command_refuses_a_bad_token():
    done = subprocess.run([sys.executable, "manage.py", "mcp", "--token", "kh_wrong"], cwd=REPO_ROOT,
                          env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "invalid or revoked token" in done.stderr


@pytest.fixture
def asgi_server():
    with asgi_server_at(subprocess_env()) as url:
        yield url


def test_streamable_http_under_mcp_with_the_same_tokens(asgi_server):
    raw = token(can_read_secrets=True)

    async def scenario():
        headers = {"Authorization": f"Bearer {raw}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
                streamable_http_client(asgi_server + "/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            await exercise(session)

    anyio.run(scenario)
    # the reveal was audited with the HTTP client's address, as a REST reveal is
    from resources.models import RevealEvent

    reveal = RevealEvent.objects.get()
    assert reveal.principal == "agent:research_agent" and reveal.remote_addr == "127.0.0.1"
    # the REST API, served by the same process, sees what MCP saved
    item = Knowledge.objects.get()
    rest = httpx2.get(f"{asgi_server}/api/knowledge/{item.id}", headers={"Authorization": f"Bearer {raw}"})
    assert rest.status_code == 200 and rest.json()["eval"]["helpful"] == 1


@pytest.mark.parametrize(("headers", "status"), [
    ({}, 401),
    ({"Authorization": "Bearer kh_wrong"}, 401),
    ({"Authorization": "Bearer {token}", "Host": "evil.example"}, 400),
])
def test_mcp_over_http_refuses_without_a_valid_token_or_host(asgi_server, headers, status):
    raw = token()
    headers = {k: v.format(token=raw) for k, v in headers.items()}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx2.post(asgi_server + "/mcp", json=body, headers={
        "Accept": "application/json, text/event-stream", **headers})
    assert response.status_code == status
    assert response.json()["error"]["code"] in ("not_authenticated", "bad_host")


def test_what_the_sdk_refuses_in_plain_text_is_answered_in_the_apis_error_shape(asgi_server):
    """Found by the 50-client sweep: a wrong content type was a plain-text 400, a huge body a plain-text 413."""
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token()}"}
    huge = httpx2.post(asgi_server + "/mcp", content=b" " * (5 * 1024 * 1024), timeout=30,
                       headers={**headers, "Content-Type": "application/json"})
    assert (huge.status_code, huge.headers["content-type"]) == (413, "application/json"), huge.text[:200]
    assert huge.json()["error"] == {"code": "too_large", "message": "request body is larger than 2,621,440 bytes",
                                    "fields": {}}
    parse_error = httpx2.post(asgi_server + "/mcp", content=b"{not json", headers={**headers, "Content-Type": "application/json"})
    assert parse_error.status_code == 400 and parse_error.json()["error"]["code"] == -32700  # JSON-RPC's own, as it was


def _chunks(total: int, size: int = 256 * 1024):
    while total > 0:
        yield b" " * min(size, total)
        total -= size


@pytest.mark.parametrize("send", ["declared", "chunked"])
def test_mcp_refuses_a_body_over_the_rest_apis_limit_with_the_same_413(asgi_server, send):
    """The SDK's own limit was 4 MiB: a 3 MB body the REST API refuses was read and parsed on /mcp."""
    from django.conf import settings

    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token()}",
               "Content-Type": "application/json"}
    size = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 400_000
    body = b" " * size if send == "declared" else _chunks(size)
    mcp = httpx2.post(asgi_server + "/mcp", content=body, headers=headers, timeout=30)
    rest = httpx2.post(asgi_server + "/api/knowledge", content=b" " * size, headers=headers, timeout=30)
    assert mcp.status_code == rest.status_code == 413, (mcp.text[:200], rest.text[:200])
    assert mcp.json()["error"] == rest.json()["error"]
    under = httpx2.post(asgi_server + "/mcp", headers=headers, timeout=30, content=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}, "padding": "x" * 2_000_000}).encode())
    assert under.status_code == 200 and under.json()["result"]["tools"], under.text[:200]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None, "*/*", "application/*"])
def test_mcp_refuses_a_body_that_is_not_json_with_415_as_rest_does(asgi_server, content_type):
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token()}"}
    if content_type:
        headers["Content-Type"] = content_type
    mcp = httpx2.post(asgi_server + "/mcp", content=b"{}", headers=headers)
    rest = httpx2.post(asgi_server + "/api/knowledge", content=b"{}", headers=headers)
    assert mcp.status_code == rest.status_code == 415, (mcp.text[:200], rest.text[:200])
    assert mcp.json()["error"]["code"] == rest.json()["error"]["code"] == "unsupported_media_type"
    assert "application/json" in mcp.json()["error"]["message"]
    json_with_charset = httpx2.post(asgi_server + "/mcp", headers={**headers, "Content-Type": "application/json; charset=utf-8"},
                                    content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode())
    assert json_with_charset.status_code == 200


def test_stdio_search_id_goes_back_with_feedback_and_stays_in_its_scope():
    from knowledge.models import FeedbackCase

    owner, outsider = token(), token("spy", ("org:other",))

    async def scenario():
        async with stdio_session(owner) as session:
            _, saved = await call(session, "knowledge_save", task="Log in to site A", content="c", types=["tool"])
            _, found = await call(session, "knowledge_search", query="site A login")
            error, _ = await call(session, "knowledge_update", knowledge_id=saved["id"], add_helpful_case={},
                                  search_id=found["search_id"])
            assert not error
            _, batch = await call(session, "knowledge_batch_update", feedback_list=[
                {"knowledge_id": saved["id"], "is_helpful": False, "search_id": found["search_id"]}])
            assert batch["succeeded"] == 1
        async with stdio_session(outsider) as session:
            _, own = await call(session, "knowledge_save", task="Rotate keys", content="c", types=["tool"])
            error, refused = await call(session, "knowledge_update", knowledge_id=own["id"], add_helpful_case={},
                                        search_id=found["search_id"])
            assert error and refused["error"]["status"] == 400 and list(refused["error"]["fields"]) == ["search_id"]
        return saved["id"], found["search_id"]

    knowledge_id, search_id = anyio.run(scenario)
    assert [(c.kind, str(c.search_id)) for c in FeedbackCase.objects.order_by("id")] == [
        ("helpful", search_id), ("harmful", search_id)]
    assert FeedbackCase.objects.filter(knowledge_id=knowledge_id).count() == 2


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_the_bearer_scheme_is_case_insensitive_on_mcp_and_rest(asgi_server, scheme):
    raw = token()
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"{scheme} {raw}"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    assert httpx2.post(asgi_server + "/mcp", json=body, headers=headers).status_code == 200
    assert httpx2.get(f"{asgi_server}/api/knowledge", headers={"Authorization": f"{scheme} {raw}"}).status_code == 200
    assert httpx2.get(f"{asgi_server}/api/knowledge", headers={"Authorization": f"{scheme} kh_wrong"}).status_code == 401


@pytest.fixture(scope="module")
def slow_export_server(django_db_setup, tmp_path_factory):  # the subprocess needs the test database made first
    started = tmp_path_factory.mktemp("slow") / "export-started"
    env = {**subprocess_env(), "KNOWHUB_FILTERS": "tests.api.slow_filter.SLOW_EXPORT", "SLOW_EXPORT_STARTED": str(started)}
    with asgi_server_at(env) as url:
        yield url, started


def test_one_agents_long_mcp_call_does_not_hold_up_anothers(slow_export_server):
    """Each tool call runs in a thread of its own: while one agent's export takes seconds, another's search, and
    the token check before it, are answered at once."""
    import threading
    import time

    from tests.api.slow_filter import SLOW_SECONDS
    from tests.conftest import wait_for

    url, started = slow_export_server
    slow, quick = token("exporter"), token("searcher")
    headers = {"Accept": "application/json, text/event-stream"}

    def tool(key, name, arguments):
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        began = time.monotonic()
        reply = httpx2.post(url + "/mcp", json=body, headers={**headers, "Authorization": f"Bearer {key}"}, timeout=60)
        return reply, time.monotonic() - began

    warm, _ = tool(quick, "knowledge_search", {"query": "deploy"})  # the server's first search loads what it needs
    assert warm.status_code == 200
    exported = {}
    exporting = threading.Thread(target=lambda: exported.update(zip(("reply", "seconds"), tool(slow, "knowledge_export", {}))))
    exporting.start()
    wait_for(started.exists, timeout=30, message="the export to begin")
    searched, seconds = tool(quick, "knowledge_search", {"query": "deploy"})
    exporting.join(60)
    assert searched.status_code == 200 and not searched.json()["result"].get("isError"), searched.text[:300]
    assert seconds < SLOW_SECONDS / 2, f"the search waited {seconds:.1f} s behind the export"
    assert exported.get("reply") is not None and exported["reply"].status_code == 200, exported
    assert not exported["reply"].json()["result"].get("isError") and exported["seconds"] >= SLOW_SECONDS


PLACES, READ_SECONDS = 2, 2  # the bounded server's places (KNOWHUB_MAX_CONCURRENT_REQUESTS) and body deadline


@pytest.fixture(scope="module")
def bounded_server(django_db_setup):
    env = {**subprocess_env(), "KNOWHUB_MAX_CONCURRENT_REQUESTS": str(PLACES), "KNOWHUB_REQUEST_QUEUE_SECONDS": "4",
           "KNOWHUB_REQUEST_READ_SECONDS": str(READ_SECONDS)}
    with asgi_server_at(env) as url:
        yield url


def tools_list(url: str, key: str):
    import time

    began = time.monotonic()
    reply = httpx2.post(url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                        headers={"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {key}"},
                        timeout=30)
    return reply, time.monotonic() - began


def test_get_mcp_is_405_so_idle_event_streams_cannot_hold_the_servers_places(bounded_server):
    """A stateless server has nothing to send on a GET stream: more GETs than the server has places are answered
    405 at once, and another agent's call is served meanwhile."""
    from concurrent.futures import ThreadPoolExecutor

    idle, busy = token("idler", ("org:idle",)), token()

    def open_stream(_):
        try:
            with httpx2.stream("GET", bounded_server + "/mcp", timeout=8, headers={
                    "Accept": "text/event-stream", "Authorization": f"Bearer {idle}"}) as stream:
                stream.read()
                return stream.status_code, stream.headers.get("allow")
        except httpx2.TimeoutException:
            return "held open", None

    with ThreadPoolExecutor(PLACES + 2) as pool:
        streams = pool.map(open_stream, range(PLACES + 2))
        reply, seconds = tools_list(bounded_server, busy)
        streams = list(streams)
    assert reply.status_code == 200 and seconds < 3, (reply.status_code, seconds, reply.text[:200])
    assert streams == [(405, "POST")] * (PLACES + 2)


def test_a_post_whose_body_stalls_holds_no_place_and_gets_408(bounded_server):
    """Clients that send a head and a little of a body, then nothing: while they stall another agent is served at
    once, and after KNOWHUB_REQUEST_READ_SECONDS each gets 408 and its connection closes."""
    import socket
    import time
    from urllib.parse import urlsplit

    stalling, busy = token("staller", ("org:idle",)), token()
    address = urlsplit(bounded_server)
    sockets = []
    for _ in range(PLACES + 2):
        sock = socket.create_connection((address.hostname, address.port))
        sock.sendall((f"POST /mcp HTTP/1.1\r\nHost: {address.netloc}\r\nAuthorization: Bearer {stalling}\r\n"
                      "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
                      "Content-Length: 100000\r\n\r\n{").encode())
        sockets.append(sock)
    began = time.monotonic()
    try:
        time.sleep(0.5)
        reply, seconds = tools_list(bounded_server, busy)
        assert reply.status_code == 200 and seconds < READ_SECONDS, (reply.status_code, seconds, reply.text[:200])
        for sock in sockets:
            sock.settimeout(READ_SECONDS + 5)
            answer = b""
            while chunk := sock.recv(4096):  # to the end: the server closes the connection
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert b'"request_timeout"' in answer
        assert time.monotonic() - began < READ_SECONDS + 5
    finally:
        for sock in sockets:
            sock.close()


def test_stdio_answers_every_line_it_cannot_read_as_http_does():
    """Lines that are no JSON-RPC message get the JSON-RPC error HTTP answers (id null: nothing to read one from),
    so a client is never left waiting; the session carries on after them."""
    import select
    import time

    process = subprocess.Popen([sys.executable, "manage.py", "mcp", "--token", token()], cwd=REPO_ROOT,
                               env=subprocess_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)

    def ask(line: bytes, timeout: float = 30):
        process.stdin.write(line + b"\n")
        process.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if select.select([process.stdout], [], [], 0.5)[0]:
                return json.loads(process.stdout.readline())
        return None

    def message(id_, method, **params):
        return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode()

    try:
        assert ask(message(1, "initialize", protocolVersion="2025-06-18", capabilities={},
                           clientInfo={"name": "t", "version": "1"}))["id"] == 1
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        lines = [(b"{{{{", -32700), (b"\xff\xfe\x00\x01", -32700), (message(2, "tools/list") + b"\x00", -32700),
                 (b"[" * 50_000 + b"]" * 50_000, -32700), (b"{}", -32600),
                 (b"[" + message(3, "tools/list") + b"]", -32600), (b'{"jsonrpc": "2.0", "id": 4}', -32600)]
        for line, code in lines:
            reply = ask(line)
            assert reply is not None, f"no reply to {line[:40]!r}"
            assert reply["id"] is None and reply["error"]["code"] == code, (line[:40], reply)
        # too deep, a number too long to read: as over HTTP, unreadable (the id cannot be read either)
        deep = (b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "knowledge_search", '
                b'"arguments": {"query": "x", "filters": ' + b"[" * 50_000 + b"]" * 50_000 + b"}}}")
        huge = (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "knowledge_search", '
                b'"arguments": {"query": "x", "top_k": ' + b"9" * 5000 + b"}}}")
        for line in (deep, huge):
            reply = ask(line)
            assert reply is not None and reply["error"]["code"] in (-32700, -32602), reply
        assert ask(message(5, "tools/list"))["result"]["tools"]
    finally:
        process.stdin.close()
        process.wait(30)
