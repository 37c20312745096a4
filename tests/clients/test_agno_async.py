"""Agno with an `AsyncKnowHub` (a coroutine retriever and tool, awaited by Agno's async path), the schema Agno derives
for the agentic tool, and search errors of every kind answered to the model as text. A mock transport answers."""
import asyncio
import json

import httpx
import jsonschema
import pytest
from agno.agent import Agent
from agno.agent import _tools as agno_tools
from agno.run.agent import RunOutput
from agno.run.base import RunContext
from agno.session import AgentSession
from agno.tools.function import Function

from knowhub_client import AsyncKnowHub, KnowHub, knowhub_retriever, search_knowledge_base

HIT = {"id": "knowledge-20260101-abcd", "task": "Log in to site A", "content": "Use the test account",
       "types": ["tool"], "tags": {"domain": "web"}, "scopes": ["org:acme"]}


def answering(reply, seen=None):
    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(json.loads(request.content))
        return httpx.Response(200, json=reply)

    return httpx.MockTransport(handle)


def test_the_retriever_over_an_async_client_is_awaited_by_agnos_async_path():
    seen = []

    async def scenario():
        async with AsyncKnowHub("http://knowhub.test", transport=answering(
                {"results": [HIT], "count": 1, "search_id": "s1"}, seen)) as hub:
            retriever = knowhub_retriever(hub)
            assert asyncio.iscoroutinefunction(retriever)
            direct = await retriever(query="site A", num_documents=2, filters={"tags.domain": "web"})
            agent = Agent(knowledge_retriever=retriever, search_knowledge=True)
            run_context = RunContext(run_id="run-1", session_id="session-1")
            tools = await agno_tools.aget_tools(agent, RunOutput(run_id="run-1", session_id="session-1"),
                                                run_context, AgentSession(session_id="session-1"))
            tool = next(t for t in tools if getattr(t, "name", None) == "search_knowledge_base")
            return direct, await tool.entrypoint(query="site A")

    direct, through_agno = asyncio.run(scenario())
    assert [d["id"] for d in direct] == [HIT["id"]] and direct[0]["meta_data"]["search_id"] == "s1"
    assert HIT["id"] in through_agno
    assert seen[0]["top_k"] == 2 and seen[0]["filters"] == [{"tags.domain": "web"}]


@pytest.mark.parametrize("agentic", [False, True])
def test_search_knowledge_base_over_an_async_client_is_a_coroutine_tool(agentic):
    async def scenario():
        async with AsyncKnowHub("http://knowhub.test", transport=answering(
                {"results": [HIT], "count": 1, "search_id": "s1"})) as hub:
            search = search_knowledge_base(hub, enable_agentic_filters=agentic)
            assert asyncio.iscoroutinefunction(search) and search.__name__ == "search_knowledge_base"
            assert "Use this function to search" in search.__doc__
            return await search("site A")

    assert json.loads(asyncio.run(scenario()))[0]["id"] == HIT["id"]


@pytest.mark.parametrize("reply, query", [
    ({"results": [HIT]}, "\ud800"),  # a lone surrogate from the model
    ({"count": 0}, "site A"),  # a 200 without results
    ({"results": "nope"}, "site A"),
])
def test_search_knowledge_base_answers_every_failure_as_text(reply, query):
    with KnowHub("http://knowhub.test", transport=answering(reply)) as hub:
        for agentic in (False, True):
            assert search_knowledge_base(hub, enable_agentic_filters=agentic)(query).startswith(
                "Error searching knowledge base: ")

    async def scenario():
        async with AsyncKnowHub("http://knowhub.test", transport=answering(reply)) as hub:
            return await search_knowledge_base(hub)(query)

    assert asyncio.run(scenario()).startswith("Error searching knowledge base: ")


def test_agnos_schema_for_the_agentic_tool_takes_filters_with_string_values():
    with KnowHub("http://knowhub.test", transport=answering({"results": []})) as hub:
        function = Function.from_callable(search_knowledge_base(hub, enable_agentic_filters=True))
    parameters = function.to_dict()["parameters"]
    jsonschema.validate({"query": "x", "filters": [{"key": "tags.domain", "value": "web"}]}, parameters)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"query": "x", "filters": [{"key": "tags.domain", "value": {"nested": 1}}]}, parameters)
