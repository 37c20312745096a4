"""What a careless caller or a hostile server does to the client: ids that are paths, replies that are not JSON,
bodies too large, errors in other shapes. A loopback server (`Flaky`) records what reaches it."""
import asyncio
import gzip
import json
from urllib.parse import unquote

import pytest

from knowhub_client import (
    AsyncKnowHub, InvalidArgument, KnowHub, KnowHubError, NotFound, RetryPolicy, ServerError, tools,
)
from tests.clients.test_client_retries import Flaky

EVIL = ["../../admin", "..", ".", "x/../../api/export?scopes=org:other#frag", "%2e%2e%2fadmin", "a b?c#d",
        "knowledge-20260101-abcd/versions", "", "a\x00b", "ünï"]

# (call, the path's segments with {} where the caller's value goes, the argument named when it is refused)
BY_ID = [
    (lambda hub, v: hub.knowledge_get(v), "api/knowledge/{}", "knowledge_id"),
    (lambda hub, v: hub.knowledge_update(v, add_helpful_case={"outcome": "ok"}), "api/knowledge/{}", "knowledge_id"),
    (lambda hub, v: hub.knowledge_edit(v, content="c"), "api/knowledge/{}", "knowledge_id"),
    (lambda hub, v: hub.knowledge_versions(v), "api/knowledge/{}/versions", "knowledge_id"),
    (lambda hub, v: hub.knowledge_restore_version(v, 1), "api/knowledge/{}/restore", "knowledge_id"),
    (lambda hub, v: hub.knowledge_archive(v), "api/knowledge/{}/archive", "knowledge_id"),
    (lambda hub, v: hub.knowledge_activate(v), "api/knowledge/{}/activate", "knowledge_id"),
    (lambda hub, v: hub.knowledge_unmerge(v), "api/knowledge/{}/unmerge", "knowledge_id"),
    (lambda hub, v: hub.knowledge_supersede(v, "other"), "api/knowledge/{}/supersede", "knowledge_id"),
    (lambda hub, v: hub.resource_get(v), "api/resource/{}", "id"),
    (lambda hub, v: hub.resource_get(v, reveal=True), "api/resource/{}", "id"),
    (lambda hub, v: hub.job_get(v), "api/jobs/{}", "job"),
    (lambda hub, v: hub.job_get({"job": {"id": v or "x/y"}}), "api/jobs/{}", "job"),
    (lambda hub, v: hub.evolve_rollback(v), "api/jobs/{}/rollback", "job"),
    (lambda hub, v: hub.evolve_accept(v), "api/jobs/{}/accept", "job"),
    (lambda hub, v: hub.evolve_reject(v), "api/jobs/{}/reject", "job"),
    (lambda hub, v: hub.document_get(v), "api/documents/{}", "document_id"),
    (lambda hub, v: hub.webhook_get(v), "api/webhooks/{}", "webhook_id"),
    (lambda hub, v: hub.webhook_change(v, active=False), "api/webhooks/{}", "webhook_id"),
    (lambda hub, v: hub.webhook_delete(v), "api/webhooks/{}", "webhook_id"),
    (lambda hub, v: hub.webhook_resend(v, "d1"), "api/webhooks/{}/deliveries/d1/resend", "webhook_id"),
    (lambda hub, v: hub.webhook_resend("w1", v), "api/webhooks/w1/deliveries/{}/resend", "delivery_id"),
]
VALID = ["knowledge-20260101-abcd", "3f2b8c1e-9d4a-4b7e-8f00-0c5a1b2c3d4e", "a.b_c-d"]


@pytest.fixture
def flaky():
    server = Flaky([])
    yield server
    server.close()


def test_an_id_no_server_id_can_be_is_refused_by_name_before_any_request(flaky):
    """The server decodes %2F before routing: "knowledge-…/versions" sent encoded would reach the versions listing."""
    with KnowHub(flaky.url, token="kh_x", retry=RetryPolicy(retries=0)) as hub:
        for call, template, argument in BY_ID:
            for value in EVIL:
                if template.startswith("api/resource/") and value == "knowledge-20260101-abcd/versions":
                    continue  # a resource id is path-like
                with pytest.raises(InvalidArgument) as refused:
                    call(hub, value)
                assert refused.value.argument == argument and argument in str(refused.value), (template, value)
    assert flaky.requests == []


def test_every_id_a_server_can_hold_stays_one_segment_of_its_own_endpoint(flaky):
    with KnowHub(flaky.url, token="kh_x", retry=RetryPolicy(retries=0)) as hub:
        for call, template, _ in BY_ID:
            for value in VALID + (["credentials/website_a"] if template.startswith("api/resource/") else []):
                flaky.script.append((200, {}, {"id": "x", "status": "succeeded"}))
                call(hub, value)
                method, raw = flaky.requests.pop()
                path, _, query = raw.partition("?")
                expected = ["", *template.split("/")]
                assert [unquote(s) for s in path.split("/")] == [value if s == "{}" else s for s in expected], raw
                assert query in ("", "reveal=true"), raw


def test_the_async_client_checks_and_encodes_ids_alike(flaky):
    async def scenario():
        async with AsyncKnowHub(flaky.url, retry=RetryPolicy(retries=0)) as hub:
            await hub.resource_get("credentials/website_a", reveal=True)
            with pytest.raises(InvalidArgument, match="knowledge_id"):
                await hub.knowledge_get("knowledge-20260101-abcd/versions")

    asyncio.run(scenario())
    assert flaky.requests == [("GET", "/api/resource/credentials%2Fwebsite_a?reveal=true")]


def test_an_html_page_is_an_error_with_its_text_not_its_markup(flaky):
    page = ("<!DOCTYPE html><html><head><title>502 Bad Gateway</title><style>body{color:red}</style></head>"
            "<body><h1>Bad&nbsp;Gateway</h1><script>alert(1)</script><p>nginx</p></body></html>")
    flaky.script = [(502, {"Content-Type": "text/html"}, page), (200, {"Content-Type": "text/html"}, page)]
    with KnowHub(flaky.url, retry=RetryPolicy(retries=0)) as hub:
        with pytest.raises(ServerError) as failed:
            hub.knowledge_list()
        assert failed.value.message == "502 Bad Gateway Bad Gateway nginx" and failed.value.status == 502
        with pytest.raises(KnowHubError, match="expected JSON") as not_json:  # a 200 that is no API reply
            hub.knowledge_list()
        assert not_json.value.status == 200


@pytest.mark.parametrize("body, cls, message, code", [
    ({"detail": "Not found."}, NotFound, "Not found.", "error"),
    ({"error": "no such item"}, NotFound, "no such item", "error"),
    ({"message": "gone fishing", "code": "x"}, NotFound, "gone fishing", "error"),
    ({"error": {"code": None, "message": None, "fields": ["not", "a", "dict"]}}, NotFound, "HTTP 404", "error"),
    ({"error": {"code": "not_found", "message": "Knowledge x not found."}}, NotFound, "Knowledge x not found.",
     "not_found"),
    ([1, 2], NotFound, "[1, 2]", "error"),
])
def test_errors_in_other_shapes_keep_a_readable_message(flaky, body, cls, message, code):
    flaky.script = [(404, {"Content-Type": "application/json"}, body)]
    with KnowHub(flaky.url, retry=RetryPolicy(retries=0)) as hub, pytest.raises(cls) as failed:
        hub.knowledge_get("x")
    assert (failed.value.message, failed.value.code, failed.value.fields) == (message, code, {})


def test_the_tools_dispatcher_reports_an_odd_error_to_the_model(flaky):
    flaky.script = [(400, {}, {"error": {"code": "invalid", "message": "bad", "fields": "top_k"}})]
    with KnowHub(flaky.url, retry=RetryPolicy(retries=0)) as hub:
        _, dispatch = tools(hub)
        reply = json.loads(dispatch({"function": {"name": "knowledge_get", "arguments": '{"knowledge_id": "x"}'}}))
    assert reply["error"] == {"code": "invalid", "message": "bad", "fields": {}, "status": 400}


def test_a_reply_over_the_size_limit_is_refused_not_buffered(flaky):
    big = {"results": [], "count": 0, "pad": "x" * 5000}
    zipped = gzip.compress(json.dumps({"pad": "y" * 100_000}).encode())
    flaky.script = [(200, {}, big), (200, {"Content-Encoding": "gzip"}, zipped),
                    (200, {"Content-Length": str(10 ** 12)}, lambda wfile: wfile.write(b"{}"))]
    with KnowHub(flaky.url, retry=RetryPolicy(retries=0)) as hub:
        hub.max_response_bytes = 4096
        for _ in range(3):  # too long, a small gzip that inflates past it, a Content-Length that says so up front
            with pytest.raises(KnowHubError, match="4096") as refused:
                hub.knowledge_list()
            assert refused.value.code == "response_too_large"
        hub.max_response_bytes = 10 ** 6
        assert hub.knowledge_list()["count"] == 0


def test_an_export_that_is_not_json_lines_is_an_error_not_a_backup(flaky, tmp_path):
    flaky.script = [(200, {"Content-Type": "text/html"}, "<html><body>Sign in</body></html>"),
                    (200, {"Content-Type": "application/x-ndjson"}, '{"kind": "knowhub-export"}\n<html>\n')]
    with KnowHub(flaky.url, retry=RetryPolicy(retries=0)) as hub:
        with pytest.raises(KnowHubError, match="text/html"):
            hub.knowledge_export(tmp_path / "backup.jsonl")
        assert not (tmp_path / "backup.jsonl").exists()
        with pytest.raises(KnowHubError, match="line 2"):
            hub.knowledge_export()


@pytest.mark.parametrize("value", ["abc", "1.5", 1.5, None, True, "", "1; DROP"])
def test_a_conflict_id_that_is_not_an_integer_is_refused_by_name_before_any_request(flaky, value):
    with KnowHub(flaky.url, token="kh_x", retry=RetryPolicy(retries=0)) as hub:
        for call in (hub.conflict_get, hub.conflict_reopen, lambda v: hub.conflict_resolve(v, "dismiss")):
            with pytest.raises(ValueError, match="conflict_id must be an integer"):
                call(value)
    assert flaky.requests == []


def test_a_conflict_id_given_as_digits_reaches_its_endpoint(flaky):
    flaky.script.append((200, {}, {"id": 7}))
    with KnowHub(flaky.url, token="kh_x", retry=RetryPolicy(retries=0)) as hub:
        hub.conflict_get("7")
    assert flaky.requests == [("GET", "/api/conflicts/7")]


@pytest.mark.parametrize("reply", [{}, {"job": None}, {"job": {}}, {"job": {"id": ""}}, {"status": "queued"}])
def test_waiting_on_something_that_is_not_a_job_names_the_mistake_before_any_request(flaky, reply):
    with KnowHub(flaky.url, token="kh_x", retry=RetryPolicy(retries=0)) as hub:
        with pytest.raises(ValueError, match="not a job"):
            hub.wait_for_job(reply, timeout=1)
        with pytest.raises(ValueError, match="not a job"):
            hub.job_get(reply)
    assert flaky.requests == []
