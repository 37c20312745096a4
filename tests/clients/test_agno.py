"""Agno integration with the real `agno` package: an Agent using knowhub_retriever, and Agno's filter semantics."""
import json

import pytest
from agno.agent import Agent
from agno.agent import _tools as agno_tools
from agno.filters import EQ as AgnoEQ
from agno.run.agent import RunOutput
from agno.run.base import RunContext
from agno.session import AgentSession

from knowhub_client import EQ, knowhub_retriever, search_knowledge_base, search_knowledge_base_schema
from tests.factories import embed_saved
from knowhub_client.agent_text import resolve_filters


@pytest.fixture
def items(hub):
    saved = {
        "web_tool": hub.knowledge_save("Log in to site A", "Use the test account for site A", ["tool"], tags={"domain": "web"}),
        "web_plan": hub.knowledge_save("Plan the site A login", "Get an account for site A first", ["plan"], tags={"domain": "web"}),
        "crm_tool": hub.knowledge_save("Log in to the CRM", "Use SSO for the CRM login", ["tool"], tags={"domain": "crm"}),
    }
    embed_saved()
    return saved


def agno_search_tool(agent: Agent):
    """The search_knowledge_base Function Agno itself builds for this agent (no model involved)."""
    run_context = RunContext(run_id="run-1", session_id="session-1", knowledge_filters=agent.knowledge_filters)
    tools = agno_tools.get_tools(agent, RunOutput(run_id="run-1", session_id="session-1"), run_context,
                                 AgentSession(session_id="session-1"))
    return next(t for t in tools if getattr(t, "name", None) == "search_knowledge_base")


def ids(tool_output: str) -> set[str]:
    return set() if tool_output == "No documents found" else {d["id"] for d in json.loads(tool_output)}


def test_an_agno_agent_searches_knowhub_through_the_retriever(hub, items):
    agent = Agent(knowledge_retriever=knowhub_retriever(hub), search_knowledge=True)
    tool = agno_search_tool(agent)
    found = json.loads(tool.entrypoint(query="site A login"))
    assert {d["id"] for d in found} >= {items["web_tool"]["id"], items["web_plan"]["id"]}
    assert found[0]["content"] and found[0]["meta_data"]["types"]


def test_static_agno_filters_reach_the_server(hub, items):
    agent = Agent(knowledge_retriever=knowhub_retriever(hub), search_knowledge=True,
                  knowledge_filters=[AgnoEQ("tags.domain", "crm")])
    assert ids(agno_search_tool(agent).entrypoint(query="log in")) == {items["crm_tool"]["id"]}


def test_agentic_agno_filters_chosen_by_the_model_reach_the_server(hub, items):
    agent = Agent(knowledge_retriever=knowhub_retriever(hub), search_knowledge=True,
                  enable_agentic_knowledge_filters=True)
    tool = agno_search_tool(agent)
    assert "filters" in tool.to_dict()["parameters"]["properties"]
    assert ids(tool.entrypoint(query="log in", filters=[{"key": "tags.domain", "value": "crm"}])) == {items["crm_tool"]["id"]}


def test_the_retriever_respects_num_documents_and_returns_none_for_nothing(hub, items):
    retrieve = knowhub_retriever(hub, default_filters=EQ("types", "tool"))
    assert len(retrieve(query="log in", num_documents=1)) == 1
    assert {d["id"] for d in retrieve(query="log in")} == {items["web_tool"]["id"], items["crm_tool"]["id"]}
    assert retrieve(query="log in", filters={"tags.domain": "nowhere"}) is None


@pytest.mark.parametrize(("agentic", "user", "expected"), [
    ([{"key": "tags.domain", "value": "web"}], None, {"tags.domain": "web"}),  # agentic only: the model's
    ([{"key": "tags.domain", "value": "web"}], {"tags.domain": "crm"}, {"tags.domain": "crm"}),  # both: user wins
    (None, {"tags.domain": "crm"}, {"tags.domain": "crm"}),  # user only
    (None, None, None),  # neither: no filter
])
def test_filter_precedence_follows_the_seed_table(agentic, user, expected):
    assert resolve_filters(agentic, user) == expected


def test_search_knowledge_base_static_filters_are_fixed(hub, items):
    search = search_knowledge_base(hub, knowledge_filters=EQ("tags.domain", "web") & EQ("types", "tool"))
    assert ids(search("log in")) == {items["web_tool"]["id"]}
    assert search_knowledge_base_schema()["function"]["parameters"]["properties"].keys() == {"query"}


def test_search_knowledge_base_agentic_user_filters_win_over_the_models(hub, items):
    search = search_knowledge_base(hub, enable_agentic_filters=True)
    assert ids(search("log in", filters=[{"key": "tags.domain", "value": "crm"}])) == {items["crm_tool"]["id"]}
    assert len(ids(search("log in"))) == 3

    pinned = search_knowledge_base(hub, enable_agentic_filters=True, knowledge_filters={"tags.domain": "web"})
    assert ids(pinned("log in", filters=[{"key": "tags.domain", "value": "crm"}])) == {
        items["web_tool"]["id"], items["web_plan"]["id"]}
    assert "filters" in search_knowledge_base_schema(True)["function"]["parameters"]["properties"]


def test_a_bad_model_filter_is_reported_to_the_model_not_raised(hub, items):
    search = search_knowledge_base(hub, enable_agentic_filters=True)
    assert search("log in", filters=[{"key": "colour", "value": "red"}]).startswith("Error searching knowledge base")


def test_build_context_lists_the_valid_filter_keys_from_the_server(hub, items):
    plain = hub.build_context()
    assert plain.startswith("<knowledge_base>\nYou have a knowledge base") and plain.endswith("</knowledge_base>")
    assert "filters" not in plain
    agentic = hub.build_context(enable_agentic_filters=True)
    assert "metadata filters: " in agentic and "tags.domain" in agentic and "types" in agentic
    assert '"key": "tags.domain", "value": "crm"' in agentic or '"key": "tags.domain", "value": "web"' in agentic


def test_focus_goal_knowledge_injects_the_related_knowledge_block(hub, items):
    block = hub.focus_goal_knowledge("Log in to site A and export the orders", top_k=3)
    assert block.startswith("📚 相关知识 (")
    assert items["web_tool"]["id"] in block and "Use the test account for site A" in block
    none = hub.focus_goal_knowledge("quantum chromodynamics lattice", min_score=5)
    assert none.startswith("📚 相关知识 (0 条)")
