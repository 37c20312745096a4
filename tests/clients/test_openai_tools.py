"""OpenAI function-calling: the schemas are valid JSON Schema and the real `openai` SDK's tool loops run them."""
import json

import jsonschema
import pytest
from openai import OpenAI

from knowhub_client import openai_schemas, tools
from knowhub_client.tools import TOOL_DEFINITIONS

SEED_TOOLS = {"knowledge_search", "knowledge_save", "knowledge_update", "knowledge_batch_update", "knowledge_list",
              "knowledge_slim", "resource_save", "resource_get"}


@pytest.mark.parametrize("definition", TOOL_DEFINITIONS, ids=lambda d: d["name"])
def test_each_tool_parameters_are_a_valid_json_schema_of_an_object(definition):
    jsonschema.Draft202012Validator.check_schema(definition["parameters"])
    assert definition["parameters"]["type"] == "object"
    assert set(definition["parameters"]["required"]) <= set(definition["parameters"]["properties"])


def test_the_seeds_tools_are_all_there_in_both_api_shapes():
    assert {t["function"]["name"] for t in openai_schemas("chat")} == SEED_TOOLS | {"knowledge_get", "knowledge_edit"}
    assert {t["name"] for t in openai_schemas("responses")} == SEED_TOOLS | {"knowledge_get", "knowledge_edit"}
    with pytest.raises(ValueError, match="chat"):
        openai_schemas("legacy")


def test_schema_parameters_match_the_client_methods_signatures(hub):
    import inspect

    for definition in TOOL_DEFINITIONS:
        accepted = set(inspect.signature(getattr(hub, definition["name"])).parameters)
        assert set(definition["parameters"]["properties"]) <= accepted, definition["name"]


def test_the_dispatcher_round_trips_tool_calls_against_the_live_server(hub):
    schemas, dispatch = tools(hub)
    save_args = {"task": "Log in to site A", "content": "Use the test account", "types": ["tool"]}
    jsonschema.validate(save_args, next(s for s in schemas if s["function"]["name"] == "knowledge_save")["function"]["parameters"])
    saved = json.loads(dispatch({"id": "c1", "type": "function",
                                 "function": {"name": "knowledge_save", "arguments": json.dumps(save_args)}}))
    assert saved["id"].startswith("knowledge-")
    found = json.loads(dispatch({"name": "knowledge_search", "arguments": {"query": "site A login"}}))
    assert [r["id"] for r in found["results"]] == [saved["id"]]


@pytest.mark.parametrize(("call", "code"), [
    ({"name": "knowledge_delete", "arguments": "{}"}, "unknown_tool"),
    ({"name": "knowledge_search", "arguments": "{not json"}, "invalid_arguments"),
    ({"name": "knowledge_search", "arguments": '{"query": "x", "colour": "red"}'}, "invalid_arguments"),
    ({"name": "knowledge_save", "arguments": '{"task": "t", "content": "c", "types": ["gossip"]}'}, "invalid"),
    ({"name": "job_get", "arguments": "{}"}, "unknown_tool"),  # waited for by code, not a tool (test_operations)
    ({"name": "knowledge_get", "arguments": "{}"}, "invalid_arguments"),  # knowledge_id is required
])
def test_bad_tool_calls_come_back_as_readable_errors_not_exceptions(hub, call, code):
    _, dispatch = tools(hub)
    assert json.loads(dispatch(call))["error"]["code"] == code


def test_a_chat_completions_tool_loop_with_the_openai_sdk(hub, fake_openai):
    hub.knowledge_save("Log in to site A", "Use the test account; 100 logins a day", ["tool"])
    schemas, dispatch = tools(hub)
    llm = OpenAI(base_url=fake_openai.base_url, api_key="test-key")
    fake_openai.reply_tool_calls([("knowledge_search", {"query": "site A login", "top_k": 3})])
    fake_openai.reply_text("Use the test account.")

    messages = [{"role": "user", "content": "How do I log in to site A?"}]
    while True:
        reply = llm.chat.completions.create(model="fake-model", messages=messages, tools=schemas)
        message = reply.choices[0].message
        if not message.tool_calls:
            break
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": dispatch(call)})

    assert message.content == "Use the test account."
    sent = fake_openai.requests[-1]["body"]
    assert sent["tools"] == schemas
    tool_reply = json.loads(sent["messages"][-1]["content"])
    assert tool_reply["results"][0]["task"] == "Log in to site A"


def test_a_responses_api_tool_loop_with_the_openai_sdk(hub, fake_openai):
    hub.knowledge_save("Log in to site A", "Use the test account", ["tool"])
    schemas, dispatch = tools(hub, api="responses")
    llm = OpenAI(base_url=fake_openai.base_url, api_key="test-key")
    fake_openai.reply_tool_calls([("knowledge_list", {"limit": 5})])
    fake_openai.reply_text("One item.")

    items = [{"role": "user", "content": "What do you know?"}]
    response = llm.responses.create(model="fake-model", input=items, tools=schemas)
    calls = [item for item in response.output if item.type == "function_call"]
    assert calls
    for call in calls:
        items.append({"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments})
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": dispatch(call)})
    final = llm.responses.create(model="fake-model", input=items, tools=schemas)

    assert final.output_text == "One item."
    output = json.loads(fake_openai.requests[-1]["body"]["input"][-1]["output"])
    assert output["count"] == 1 and output["results"][0]["task"] == "Log in to site A"


def test_the_async_dispatcher_runs_tool_calls_with_the_async_client(live_server, token_for):
    import asyncio

    from knowhub_client import AsyncKnowHub, async_tools

    token = token_for()

    async def scenario():
        async with AsyncKnowHub(live_server.url, token=token) as hub:
            schemas, dispatch = async_tools(hub)
            assert schemas == openai_schemas("chat")
            saved = json.loads(await dispatch({"name": "knowledge_save", "arguments": json.dumps(
                {"task": "Async tool", "content": "c", "types": ["tool"]})}))
            listed = json.loads(await dispatch({"name": "knowledge_list", "arguments": "{}"}))
            assert [r["id"] for r in listed["results"]] == [saved["id"]]
            bad = json.loads(await dispatch({"name": "knowledge_get_all", "arguments": "{}"}))
            assert bad["error"]["code"] == "unknown_tool"
            missing = json.loads(await dispatch({"name": "knowledge_update", "arguments": json.dumps(
                {"knowledge_id": "knowledge-20990101-zzzz", "update_score": 4})}))
            assert missing["error"]["status"] == 404

    asyncio.run(scenario())
