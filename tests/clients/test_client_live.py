"""The Python client against a live server: every method, sync and async, errors and filters."""
import asyncio

import pytest

from knowhub_client import (
    AND, EQ, GTE, IN, NOT, AsyncKnowHub, AuthenticationFailed, BadRequest, NotFound, PermissionDenied, RetryPolicy,
)
from tests.factories import embed_saved

SEED_TASK = "使用 Selenium 登录某网站并绕过反爬检测"
SEED_CONTENT = "使用 undetected_chromedriver 可以绕过大部分检测。关键点:1) 设置合适的 user-agent 2) 随机延迟"


def test_save_then_get_and_search_round_trip_in_the_seed_shape(hub):
    saved = hub.knowledge_save(SEED_TASK, SEED_CONTENT, ["tool", "strategy"], tags={"domain": "crawling"},
                               source_name="notes", urls=["https://example.com"], submitted_by="user@example.com",
                               score=4, message_id="msg-1")
    assert saved["id"].startswith("knowledge-")
    assert saved["scopes"] == ["org:acme"] and saved["owner"] == "agent:research_agent"
    assert saved["source"]["agent_id"] == "research_agent" and saved["source"]["urls"] == ["https://example.com"]
    assert saved["eval"]["score"] == 4 and saved["message_id"] == "msg-1"
    assert hub.knowledge_get(saved["id"]) == saved

    found = hub.knowledge_search("Selenium 登录 反爬", top_k=5, min_score=3, types=["tool"])
    assert found["count"] == 1 and found["results"][0]["id"] == saved["id"]
    assert hub.knowledge_search("Selenium", min_score=5)["count"] == 0  # score 4 < min_score 5


def test_search_filters_built_in_python_narrow_on_the_server(hub):
    web = hub.knowledge_save("Log in to site A", "Use the test account", ["tool"], tags={"domain": "web"})
    plan = hub.knowledge_save("Plan a login to site A", "First get an account", ["plan"], tags={"domain": "web"})
    hub.knowledge_save("Log in to the CRM", "Use SSO", ["tool"], tags={"domain": "crm"})
    embed_saved()

    only_web_tools = EQ("tags.domain", "web") & ~IN("types", ["plan"])
    assert [r["id"] for r in hub.knowledge_search("log in", filters=only_web_tools)["results"]] == [web["id"]]
    either = hub.knowledge_search("log in", top_k=10, filters=EQ("types", "plan") | EQ("tags.domain", "crm"))
    assert plan["id"] in {r["id"] for r in either["results"]} and either["count"] == 2
    assert hub.knowledge_search("log in", filters=AND(GTE("score", 3), NOT(EQ("tags.domain", "web"))))["count"] == 1


def test_update_batch_update_and_list(hub):
    a = hub.knowledge_save("Task A", "Content A", ["strategy"])
    b = hub.knowledge_save("Task B", "Content B", ["usecase"])
    updated = hub.knowledge_update(a["id"], add_helpful_case={"task": "t", "outcome": "成功"}, update_score=5)
    assert updated["eval"]["helpful"] == 1 and updated["eval"]["score"] == 5
    assert updated["eval"]["helpful_history"][0]["outcome"] == "成功"

    batch = hub.knowledge_batch_update([
        {"knowledge_id": b["id"], "is_helpful": False, "case": {"outcome": "失败"}},
        {"knowledge_id": "knowledge-20990101-zzzz", "is_helpful": True},
    ])
    assert (batch["succeeded"], batch["failed"]) == (1, 1)
    assert hub.knowledge_get(b["id"])["eval"]["harmful"] == 1

    page = hub.knowledge_list(limit=1)
    assert [r["id"] for r in page["results"]] == [b["id"]] and page["next"]
    assert [r["id"] for r in hub.knowledge_list(limit=1, cursor=page["next"])["results"]] == [a["id"]]
    assert [r["id"] for r in hub.knowledge_list(types=["strategy"])["results"]] == [a["id"]]
    assert hub.knowledge_list(scopes=["org:other"])["count"] == 0


def test_filters_endpoint_lists_keys_and_operators(hub):
    hub.knowledge_save("t", "c", ["tool"], tags={"domain": "web"})
    reply = hub.knowledge_filters()
    assert "tags.domain" in reply["keys"] and "EQ" in reply["operators"]
    assert reply["keys"]["tags.domain"]["samples"] == ["web"]


def test_resources_save_and_get_with_reveal(hub, hub_for):
    saved = hub.resource_save("credentials/website_a", "某网站测试账号", body="每天限额 100 次",
                              secure_body="账号:user@example.com\n密码:SecurePass123", content_type="credential",
                              metadata={"acquired_at": "2026-03-06T10:00:00Z"})
    assert saved["has_secret"] and "secure_body" not in saved
    assert "secure_body" not in hub.resource_get("credentials/website_a")
    assert hub.resource_get("credentials/website_a", reveal=True)["secure_body"].endswith("SecurePass123")
    with pytest.raises(PermissionDenied, match="may not reveal"):
        hub_for(agent_id="no_secrets").resource_get("credentials/website_a", reveal=True)
    with pytest.raises(NotFound):
        hub_for(agent_id="outsider", scopes=["org:other"]).resource_get("credentials/website_a")


def test_server_errors_become_typed_exceptions_with_the_servers_message(hub, live_server):
    from knowhub_client import KnowHub

    with pytest.raises(BadRequest) as bad:
        hub.knowledge_save("t", "c", ["gossip"])
    assert "types" in bad.value.fields and bad.value.status == 400 and "types" in bad.value.message
    with pytest.raises(BadRequest, match="unknown filter operator"):
        hub.knowledge_search("x", filters={"op": "LIKE", "key": "task", "value": "x"})
    with pytest.raises(NotFound):
        hub.knowledge_get("knowledge-20990101-zzzz")
    with pytest.raises(PermissionDenied, match="org:other"):
        hub.knowledge_save("t", "c", ["tool"], scopes=["org:other"])
    with KnowHub(live_server.url, token="kh_wrong") as stranger, pytest.raises(AuthenticationFailed, match="invalid"):
        stranger.knowledge_list()


def test_a_save_retried_with_its_key_stores_one_item(hub):
    first = hub.knowledge_save("t", "c", ["tool"], idempotency_key="save-1")
    again = hub.knowledge_save("t", "c", ["tool"], idempotency_key="save-1")
    assert again == first and hub.knowledge_list()["count"] == 1


def test_slim_without_an_llm_is_a_conflict_naming_the_setting(hub, settings):
    from knowhub_client import Conflict

    settings.KNOWHUB_LLM_MODEL = ""
    with pytest.raises(Conflict) as exc:
        hub.knowledge_slim()
    assert exc.value.code == "llm_not_configured"


def test_the_async_client_does_the_same(live_server, token_for):
    token = token_for(can_read_secrets=True)

    async def scenario():
        async with AsyncKnowHub(live_server.url, token=token, retry=RetryPolicy(backoff=0.01)) as hub:
            saved = await hub.knowledge_save("Async task", "Async content", ["tool"], tags={"domain": "web"})
            assert (await hub.knowledge_get(saved["id"]))["id"] == saved["id"]
            found = await hub.knowledge_search("async", filters=EQ("tags.domain", "web"))
            assert [r["id"] for r in found["results"]] == [saved["id"]]
            updated = await hub.knowledge_update(saved["id"], add_harmful_case={"outcome": "failed"})
            assert updated["eval"]["harmful"] == 1
            assert (await hub.knowledge_batch_update([{"knowledge_id": saved["id"], "is_helpful": True}]))["succeeded"] == 1
            assert (await hub.knowledge_list(types=["tool"]))["count"] == 1
            assert "tags.domain" in (await hub.knowledge_filters())["keys"]
            await hub.resource_save("code/a", "A", body="print(1)", secure_body="s3cret", content_type="code")
            assert (await hub.resource_get("code/a", reveal=True))["secure_body"] == "s3cret"
            assert "Async task" in await hub.focus_goal_knowledge("async task")
            assert "tags.domain" in await hub.build_context(enable_agentic_filters=True)
            with pytest.raises(NotFound):
                await hub.knowledge_get("knowledge-20990101-zzzz")

    asyncio.run(scenario())
