"""What the client will not send (NaN, a lone surrogate, a string where a list goes, ...) is refused by name before any
request, and what it receives must be the API's: a JSON object. The tools dispatcher answers the model, never raises.
A mock transport records each request's body."""
import asyncio
import json

import httpx
import pytest

from knowhub_client import AsyncKnowHub, InvalidArgument, KnowHub, KnowHubError, RetryPolicy, async_tools, tools

REPLY = {"id": "knowledge-20260101-abcd", "results": [], "count": 0, "search_id": "s1", "status": "succeeded"}


class Recorder:
    """A mock transport's handler: records (method, path, query, body) and answers `replies` in turn, then REPLY."""

    def __init__(self, *replies):
        self.replies, self.requests = list(replies), []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, dict(request.url.params), body))
        if self.replies:
            return self.replies.pop(0)
        return httpx.Response(200, json=REPLY)


@pytest.fixture
def recorded():
    recorder = Recorder()
    with KnowHub("http://knowhub.test", token="kh_x", retry=RetryPolicy(retries=0),
                 transport=httpx.MockTransport(recorder)) as hub:
        yield hub, recorder


@pytest.mark.parametrize("call, argument", [
    (lambda hub: hub.knowledge_search("x", top_k=float("nan")), "top_k"),
    (lambda hub: hub.knowledge_search("x", answer_floor=float("inf")), "answer_floor"),
    (lambda hub: hub.knowledge_search("x", relevance_floor=1e999), "relevance_floor"),
    (lambda hub: hub.knowledge_search("\ud800"), "query"),
    (lambda hub: hub.knowledge_search(None), "query"),
    (lambda hub: hub.knowledge_save("t", "c", ["tool"], tags={"domain": "\udfff"}), "tags.domain"),
    (lambda hub: hub.knowledge_save("t", "c", ["tool"], confidence=float("-inf")), "eval.confidence"),
    (lambda hub: hub.knowledge_update("knowledge-20260101-abcd", add_helpful_case={"n": float("nan")}),
     "add_helpful_case.n"),
    (lambda hub: hub.knowledge_list(types=["tool\ud800"]), "types[0]"),
    (lambda hub: hub.knowledge_list(types=[1]), "types"),
    (lambda hub: hub.knowledge_list(scopes=["org:a,org:b"]), "scopes"),
    (lambda hub: hub.knowledge_save("t", "c", [None]), "types"),
    (lambda hub: hub.knowledge_save("t", "c", 5), "types"),
    (lambda hub: hub.knowledge_update("knowledge-20260101-abcd", add_helpful_case=deep(300)), "add_helpful_case"),
])
def test_an_argument_the_client_cannot_send_is_refused_by_name_before_any_request(recorded, call, argument):
    hub, recorder = recorded
    with pytest.raises(InvalidArgument) as refused:
        call(hub)
    assert refused.value.argument == argument and refused.value.code == "invalid_argument"
    assert refused.value.fields == {argument: [refused.value.message.split(": ", 1)[1]]}
    assert recorder.requests == []


def deep(levels):
    value = "leaf"
    for _ in range(levels):
        value = {"a": value}
    return value


def test_one_string_where_a_list_goes_is_a_list_of_it(recorded):
    hub, recorder = recorded
    hub.knowledge_save("t", "c", "tool", scopes="org:acme", resource_ids="code/a")
    hub.knowledge_search("x", types="tool")
    hub.knowledge_list(types="tool", scopes="org:acme")
    (_, _, _, saved), (_, _, _, searched), (_, _, listed, _) = recorder.requests
    assert (saved["types"], saved["scopes"], saved["resource_ids"]) == (["tool"], ["org:acme"], ["code/a"])
    assert searched["types"] == ["tool"] and listed == {"limit": "10", "types": "tool", "scopes": "org:acme"}


@pytest.mark.parametrize("reply", [
    httpx.Response(200, content=b""), httpx.Response(201, content=b""), httpx.Response(200, json=[1, 2, 3]),
    httpx.Response(201, json="saved"), httpx.Response(200, json=None), httpx.Response(200, json=7),
])
def test_a_success_that_is_not_a_json_object_is_a_protocol_error(reply):
    with KnowHub("http://knowhub.test", retry=RetryPolicy(retries=0),
                 transport=httpx.MockTransport(Recorder(reply))) as hub:
        with pytest.raises(KnowHubError, match=r"expected JSON \(an object\)") as failed:
            hub.knowledge_save("t", "c", ["tool"])
    assert failed.value.status == reply.status_code


def test_a_job_reply_without_a_status_is_a_protocol_error_not_a_key_error():
    reply = httpx.Response(200, json={"id": "3f2b8c1e-9d4a-4b7e-8f00-0c5a1b2c3d4e"})
    with KnowHub("http://knowhub.test", transport=httpx.MockTransport(Recorder(reply))) as hub:
        with pytest.raises(KnowHubError, match="status") as failed:
            hub.wait_for_job("3f2b8c1e-9d4a-4b7e-8f00-0c5a1b2c3d4e", timeout=1)
    assert failed.value.code == "invalid_reply"


def call(name, arguments):
    return {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}


BAD_CALLS = [
    call("knowledge_search", '{"query": "x", "top_k": NaN}'),
    call("knowledge_search", '{"query": "x", "top_k": Infinity}'),
    call("knowledge_search", '{"query": "x", "top_k": 1e999}'),
    call("knowledge_search", '{"query": "\\ud800"}'),
    call("knowledge_search", '{"query": null}'),
    call("knowledge_search", '{"query": "x", "types": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    {"name": "knowledge_update", "arguments": {"knowledge_id": "k", "add_helpful_case": deep(2000)}},  # as a dict
    call("knowledge_save", {"task": "t", "content": "c", "types": ["tool"], "idempotency_key": "mine"}),
    call("knowledge_get", {"knowledge_id": "knowledge-20260101-abcd/versions"}),
    call("knowledge_list", {"types": [1]}),
]


@pytest.mark.parametrize("tool_call", BAD_CALLS, ids=range(len(BAD_CALLS)))
def test_the_dispatchers_answer_arguments_the_client_cannot_send_with_an_error(tool_call):
    recorder = Recorder()

    with KnowHub("http://knowhub.test", transport=httpx.MockTransport(recorder)) as hub:
        _, dispatch = tools(hub)
        reply = json.loads(dispatch(tool_call))

    async def scenario():
        async with AsyncKnowHub("http://knowhub.test", transport=httpx.MockTransport(recorder)) as hub:
            _, dispatch = async_tools(hub)
            return json.loads(await dispatch(tool_call))

    assert reply["error"]["code"] in ("invalid_argument", "invalid_arguments") and reply["error"]["message"]
    assert asyncio.run(scenario()) == reply
    assert recorder.requests == []


def test_the_dispatcher_refuses_an_argument_the_tools_schema_does_not_offer(recorded):
    hub, recorder = recorded
    _, dispatch = tools(hub)
    reply = json.loads(dispatch(call("knowledge_save", {"task": "t", "content": "c", "types": ["tool"],
                                                        "idempotency_key": "k", "colour": "red"})))
    assert reply["error"]["code"] == "invalid_arguments" and "'colour', 'idempotency_key'" in reply["error"]["message"]
    assert recorder.requests == []


def test_model_filters_in_the_search_tool_reach_the_server_in_its_form(recorded):
    hub, recorder = recorded
    schemas, dispatch = tools(hub)
    search = next(s["function"] for s in schemas if s["function"]["name"] == "knowledge_search")
    assert "filters" in search["parameters"]["properties"]
    dispatch(call("knowledge_search", {"query": "x", "filters": [{"key": "tags.domain", "value": "web"}]}))
    assert recorder.requests[-1][3]["filters"] == {"tags.domain": "web"}


def test_build_context_names_the_search_tool_it_is_paired_with(recorded):
    hub, recorder = recorded
    recorder.replies = [httpx.Response(200, json={"keys": {"tags.domain": {"samples": ["web"]}, "types": {}}})] * 2
    agno = hub.build_context(enable_agentic_filters=True)
    openai = hub.build_context(enable_agentic_filters=True, tool_name="knowledge_search")
    assert "search_knowledge_base tool" in agno and "knowledge_search" not in agno
    assert "knowledge_search tool with the filters parameter" in openai and "search_knowledge_base" not in openai


def test_knowledge_edit_sends_base_updated_at_only_when_given(recorded):
    hub, recorder = recorded
    hub.knowledge_edit("knowledge-20260101-abcd", content="c", base_updated_at="2026-01-01T00:00:00.123456Z")
    hub.knowledge_edit("knowledge-20260101-abcd", content="c")
    assert [body.get("base_updated_at") for _, _, _, body in recorder.requests] == ["2026-01-01T00:00:00.123456Z", None]
