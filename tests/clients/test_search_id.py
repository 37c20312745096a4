"""The client carries `search_id` end to end: a search's id goes back with feedback (sync, async, OpenAI tools, Agno)."""
import asyncio
import json

import pytest

from knowhub_client import AsyncKnowHub, BadRequest, RetryPolicy, async_tools, knowhub_retriever, tools
from knowledge.models import FeedbackCase


def cited(knowledge_id: str) -> list[tuple[str, str]]:
    return [(c.kind, str(c.search_id)) for c in FeedbackCase.objects.filter(knowledge_id=knowledge_id).order_by("id")]


def test_search_id_goes_back_with_update_and_batch_update(hub):
    saved = hub.knowledge_save("Log in to site A", "Use the test account", ["tool"])
    found = hub.knowledge_search("site A login")
    assert [r["id"] for r in found["results"]] == [saved["id"]] and found["search_id"]
    hub.knowledge_update(saved["id"], add_helpful_case={"outcome": "ok"}, search_id=found["search_id"])
    batch = hub.knowledge_batch_update([{"knowledge_id": saved["id"], "is_helpful": False}], search_id=found["search_id"])
    assert batch["succeeded"] == 1
    assert cited(saved["id"]) == [("helpful", found["search_id"]), ("harmful", found["search_id"])]


def test_another_orgs_search_id_is_a_bad_request_naming_search_id(hub, hub_for):
    search_id = hub.knowledge_search("anything")["search_id"]
    spy = hub_for("spy", scopes=("org:other",))
    own = spy.knowledge_save("Rotate keys", "Monthly", ["tool"])
    with pytest.raises(BadRequest) as refused:
        spy.knowledge_update(own["id"], add_helpful_case={}, search_id=search_id)
    assert list(refused.value.fields) == ["search_id"]
    assert not FeedbackCase.objects.exists()


def test_async_client_carries_search_id(live_server, token_for):
    token = token_for()

    async def scenario():
        async with AsyncKnowHub(live_server.url, token=token, retry=RetryPolicy(backoff=0.01)) as hub:
            saved = await hub.knowledge_save("Async login", "Use the async account", ["tool"])
            found = await hub.knowledge_search("async login")
            await hub.knowledge_update(saved["id"], add_helpful_case={}, search_id=found["search_id"])
            await hub.knowledge_batch_update([{"knowledge_id": saved["id"], "is_helpful": True,
                                               "search_id": found["search_id"]}])
            return saved["id"], found["search_id"]

    knowledge_id, search_id = asyncio.run(scenario())
    assert cited(knowledge_id) == [("helpful", search_id), ("helpful", search_id)]


def call(name: str, **arguments) -> dict:
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def test_openai_tools_report_feedback_with_the_searchs_id(hub):
    saved = hub.knowledge_save("Export orders", "Use the CSV button", ["tool"])
    schemas, dispatch = tools(hub)
    update = next(s["function"] for s in schemas if s["function"]["name"] == "knowledge_update")
    assert "search_id" in update["parameters"]["properties"]
    found = json.loads(dispatch(call("knowledge_search", query="export orders")))
    dispatch(call("knowledge_update", knowledge_id=saved["id"], add_helpful_case={"outcome": "ok"},
                  search_id=found["search_id"]))
    dispatch(call("knowledge_batch_update", feedback_list=[
        {"knowledge_id": saved["id"], "is_helpful": True, "search_id": found["search_id"]}]))
    assert cited(saved["id"]) == [("helpful", found["search_id"])] * 2


def test_async_openai_tools_report_feedback_with_the_searchs_id(live_server, token_for):
    token = token_for()

    async def scenario():
        async with AsyncKnowHub(live_server.url, token=token) as hub:
            _, dispatch = async_tools(hub)
            saved = json.loads(await dispatch(call("knowledge_save", task="Async export", content="c", types=["tool"])))
            found = json.loads(await dispatch(call("knowledge_search", query="async export")))
            await dispatch(call("knowledge_update", knowledge_id=saved["id"], add_harmful_case={},
                                search_id=found["search_id"]))
            return saved["id"], found["search_id"]

    knowledge_id, search_id = asyncio.run(scenario())
    assert cited(knowledge_id) == [("harmful", search_id)]


def test_agno_documents_carry_the_search_id(hub):
    saved = hub.knowledge_save("Log in to site A", "Use the test account", ["tool"])
    [document] = knowhub_retriever(hub)("site A login")
    search_id = document["meta_data"]["search_id"]
    hub.knowledge_update(saved["id"], add_helpful_case={}, search_id=search_id)
    assert cited(saved["id"]) == [("helpful", search_id)]


def test_the_client_gets_nothing_for_an_off_topic_query_unless_it_opens_the_gate(hub):
    from tests.factories import embed_saved

    saved = hub.knowledge_save("Export orders", "Use the CSV button on the orders page", ["tool"])
    embed_saved()  # the worker's part: a vector makes it a candidate for any query
    nothing = hub.knowledge_search("zzqxv sourdough byzantine")
    assert nothing["results"] == [] and nothing["count"] == 0
    opened = hub.knowledge_search("zzqxv sourdough byzantine", answer_floor=0, relevance_floor=0, relevance_ratio=0,
                                  explain=True)
    assert [r["id"] for r in opened["results"]] == [saved["id"]]
    assert 0.0 <= opened["results"][0]["relevance"] < 0.5 and "gate" in opened["results"][0]["explanation"]
    with pytest.raises(BadRequest) as refused:
        hub.knowledge_search("orders", answer_floor=2)
    assert list(refused.value.fields) == ["answer_floor"]
