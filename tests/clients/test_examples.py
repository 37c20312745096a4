"""The README's examples run as written, against a live server (and the loopback LLM for OpenAI)."""
import anyio
from openai import OpenAI

from examples import agno_agent, client_quickstart, mcp_client, openai_tools
from tests.api.test_mcp import subprocess_env


def test_client_quickstart_runs(live_server, token_for, capsys):
    result = client_quickstart.main(live_server.url, token_for())
    assert result["found"]["results"][0]["id"] == result["saved"]["id"]
    assert "📚 相关知识 (1 条)" in capsys.readouterr().out


def test_openai_tools_example_runs_a_tool_loop(live_server, token_for, fake_openai):
    fake_openai.reply_tool_calls([("knowledge_save", {"task": "Log in to site A", "content": "Use the test account",
                                                      "types": ["tool"]})])
    fake_openai.reply_tool_calls([("knowledge_search", {"query": "site A"})])
    fake_openai.reply_text("Use the test account.")
    llm = OpenAI(base_url=fake_openai.base_url, api_key="test-key")
    assert openai_tools.main(live_server.url, token_for(), "site A?", llm=llm, model="fake-model") == "Use the test account."
    assert '"Log in to site A"' in fake_openai.requests[-1]["body"]["messages"][-1]["content"]


def test_agno_example_retrieves_with_static_filters(live_server, token_for, monkeypatch):
    from knowhub_client import KnowHub

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    token = token_for()
    with KnowHub(live_server.url, token=token) as hub:
        web = hub.knowledge_save("Log in to site A", "Use the test account", ["tool"], tags={"domain": "web"})
        hub.knowledge_save("Log in to the CRM", "Use SSO", ["tool"], tags={"domain": "crm"})
    assert [d["id"] for d in agno_agent.main(live_server.url, token, "log in")] == [web["id"]]


def test_mcp_example_over_stdio(transactional_db, token_for):
    found = anyio.run(mcp_client.demo, "stdio", token_for(), "", subprocess_env())
    assert found["count"] == 1
