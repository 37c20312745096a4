"""The agent API of seed 003: search, save and read, with per-agent tokens and scopes."""
import json

import pytest
from rest_framework.test import APIClient

from tests.callers import agent_client
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db

SEED_SAVE_BODY = {
    "task": "在什么场景下要完成什么目标",
    "content": "核心知识内容",
    "types": ["tool", "strategy"],
    "tags": {"category": "preference", "domain": "coding_style"},
    "scopes": ["org:cybertogether"],
    "owner": "agent:research_agent",
    "source": {
        "name": "资源名称",
        "category": "exp",
        "urls": ["https://example.com"],
        "agent_id": "research_agent",
        "submitted_by": "user@example.com",
        "message_id": "msg-xxx",
    },
    "score": 4,
}


def client_for(agent_id, scopes, **kwargs):
    return agent_client(agent_id, scopes, **kwargs)


@pytest.fixture
def owner():
    return client_for("research_agent", ["org:cybertogether"])


@pytest.fixture
def outsider():
    return client_for("spy_agent", ["org:other"])


def test_seed_save_body_works_verbatim_and_comes_back_in_the_seed_shape(owner):
    response = owner.post("/api/knowledge", SEED_SAVE_BODY, format="json")
    assert response.status_code == 201, response.json()
    item = response.json()
    assert item["id"].startswith("knowledge-")
    for key in ("task", "content", "types", "tags", "scopes", "owner"):
        assert item[key] == SEED_SAVE_BODY[key]
    assert item["eval"]["score"] == 4 and item["eval"]["helpful_history"] == []
    assert {k: item["source"][k] for k in SEED_SAVE_BODY["source"]} == SEED_SAVE_BODY["source"]
    assert owner.get(f"/api/knowledge/{item['id']}").json() == item


def test_scopes_and_owner_default_from_the_token(owner):
    body = {"task": "t", "content": "c", "types": ["plan"]}
    item = owner.post("/api/knowledge", body, format="json").json()
    assert item["scopes"] == ["org:cybertogether"]
    assert item["owner"] == "agent:research_agent"
    assert item["source"]["agent_id"] == "research_agent"
    assert item["eval"]["score"] == 3


def test_writing_to_a_scope_the_token_cannot_write_is_403(owner):
    body = {**SEED_SAVE_BODY, "scopes": ["org:other"]}
    response = owner.post("/api/knowledge", body, format="json")
    assert response.status_code == 403
    assert "org:other" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"types": ["gossip"]}, "types"),
        ({"score": 6}, "score"),
        ({"score": 0}, "score"),
        ({"tags": {"domain": 7}}, "tags"),
        ({"scopes": ["acme"]}, "scopes"),
        ({"task": ""}, "task"),
        ({"resource_ids": ["code/missing"]}, "resource_ids"),
    ],
)
def test_bad_save_input_is_a_400_naming_the_field_and_nothing_is_stored(owner, change, field):
    from knowledge.models import Knowledge

    response = owner.post("/api/knowledge", {**SEED_SAVE_BODY, **change}, format="json")
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["fields"] and field in error["message"]
    assert not Knowledge.objects.exists()


def test_malformed_json_is_a_400_not_a_500(owner):
    response = owner.generic("POST", "/api/knowledge", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"


def test_search_returns_the_seed_shape(owner):
    saved = owner.post("/api/knowledge", {**SEED_SAVE_BODY, "task": "Use undetected_chromedriver to log in"}, format="json").json()
    response = owner.get("/api/knowledge/search", {"q": "undetected_chromedriver", "top_k": 5, "min_score": 3})
    body = response.json()
    assert response.status_code == 200 and body["count"] == 1
    hit = body["results"][0]
    assert hit["id"] == saved["id"]
    assert set(hit) >= {"id", "task", "content", "types", "tags", "eval", "quality_score"}
    assert hit["eval"] == {"score": 4, "helpful": 0, "harmful": 0, "confidence": 0.5}
    assert hit["quality_score"] == 4.0


def test_search_by_post_takes_nested_filters_and_explains(owner):
    owner.post("/api/knowledge", {**SEED_SAVE_BODY, "task": "proxy rotation for scraping", "tags": {"domain": "scraping"}}, format="json")
    owner.post("/api/knowledge", {**SEED_SAVE_BODY, "task": "proxy rotation for testing", "tags": {"domain": "testing"}}, format="json")
    body = {"q": "proxy rotation", "filters": {"op": "AND", "conditions": [{"op": "EQ", "key": "tags.domain", "value": "testing"}]}, "explain": True}
    response = owner.post("/api/knowledge/search", body, format="json").json()
    assert [r["tags"]["domain"] for r in response["results"]] == ["testing"]
    assert "fused_score" in response["results"][0]["explanation"]
    get = owner.get("/api/knowledge/search", {"q": "proxy rotation", "filters": json.dumps(body["filters"])}).json()
    assert [r["tags"]["domain"] for r in get["results"]] == ["testing"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"q": "x", "top_k": 0}, "top_k"),
        ({"q": "x", "top_k": 101}, "top_k"),
        ({"q": "x", "min_score": 9}, "min_score"),
        ({"q": "x", "types": "tool,gossip"}, "types"),
        ({"q": "x", "filters": "{bad json"}, "filters"),
        ({"q": "x", "filters": '{"op": "EQ", "key": "colour", "value": "red"}'}, "filters"),
        ({"q": "x", "filters": '{"op": "LIKE", "key": "task", "value": "x"}'}, "filters"),
        ({"q": "x", "rank": "random"}, "rank"),
    ],
)
def test_bad_search_parameters_are_a_400_naming_the_field(owner, params, field):
    response = owner.get("/api/knowledge/search", params)
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_unknown_filter_key_error_lists_the_valid_keys(owner):
    response = owner.get("/api/knowledge/search", {"q": "x", "filters": '{"op": "EQ", "key": "colour", "value": "red"}'})
    assert "tags.<name>" in response.json()["error"]["message"]


def test_agents_in_other_orgs_cannot_see_each_others_items(owner, outsider):
    item = owner.post("/api/knowledge", {**SEED_SAVE_BODY, "task": "secret sauce recipe"}, format="json").json()
    assert outsider.get(f"/api/knowledge/{item['id']}").status_code == 404
    assert outsider.get("/api/knowledge/search", {"q": "secret sauce recipe", "min_score": 1}).json()["count"] == 0
    sneaky = {"q": "secret sauce", "scopes": "org:cybertogether", "filters": '{"op": "EQ", "key": "scopes", "value": "org:cybertogether"}'}
    assert outsider.get("/api/knowledge/search", sneaky).json()["count"] == 0
    assert owner.get(f"/api/knowledge/{item['id']}").status_code == 200


def test_static_filters_on_a_token_are_always_applied(owner):
    owner.post("/api/knowledge", {**SEED_SAVE_BODY, "task": "deploy with helm", "types": ["tool"]}, format="json")
    owner.post("/api/knowledge", {**SEED_SAVE_BODY, "task": "deploy plan", "types": ["plan"]}, format="json")
    planner = client_for("planner", ["org:cybertogether"], static_filters={"op": "EQ", "key": "types", "value": "plan"})
    response = planner.get("/api/knowledge/search", {"q": "deploy", "types": "tool,plan"})
    assert response.status_code == 200, response.json()
    results = response.json()["results"]
    assert [r["task"] for r in results] == ["deploy plan"]


@pytest.mark.parametrize("header", [None, "Bearer nope", "Token abc", "Bearer a b"])
def test_missing_or_bad_tokens_are_401(header):
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/knowledge/search", {"q": "x"})
    assert response.status_code == 401
    assert set(response.json()["error"]) == {"code", "message", "fields"}


def test_unknown_id_is_404_in_the_error_shape(owner):
    response = owner.get("/api/knowledge/knowledge-20990101-zzzz")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_curator_session_may_call_the_api_with_csrf(curator):
    make_knowledge(task="Curator visible item", scopes=["org:anything"], embed=False)
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(curator)
    assert client.get("/api/knowledge/search", {"q": "curator visible", "min_score": 1}).json()["count"] == 1
    assert client.post("/api/knowledge", {"task": "t", "content": "c", "types": ["plan"], "scopes": ["org:x"]}, format="json").status_code == 403


def test_create_agent_token_command_prints_a_working_token():
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("create_agent_token", "--agent", "research_agent", "--scopes", "org:acme", stdout=out)
    key = out.getvalue().splitlines()[1]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/api/knowledge/search", {"q": "anything"}).status_code == 200


def test_the_documented_example_filters_audit_and_rate_limit(owner, settings, monkeypatch, caplog):
    import examples.filters as example

    settings.KNOWHUB_FILTERS = ["examples.filters.AUDIT", "examples.filters.RATE_LIMIT"]
    monkeypatch.setattr(example, "RATE_LIMIT_CALLS", 2)
    example._recent.clear()
    with caplog.at_level("INFO", logger="knowhub.audit"):
        assert owner.get("/api/knowledge/search", {"q": "a"}).status_code == 200
        assert owner.get("/api/knowledge/search", {"q": "b"}).status_code == 200
    assert "knowledge_search by agent:research_agent" in caplog.text
    limited = owner.get("/api/knowledge/search", {"q": "c"})
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "rate_limited" and "rate_limit" in limited.json()["error"]["message"]
    assert 1 <= int(limited["Retry-After"]) <= example.RATE_LIMIT_WINDOW_SECONDS  # when the oldest call leaves the window


def test_list_is_newest_first_and_pages_with_a_cursor(owner, outsider):
    from datetime import datetime, timedelta, timezone

    start = datetime(2026, 3, 1, tzinfo=timezone.utc)
    made = [make_knowledge(task=f"item {i}", scopes=["org:cybertogether"], created_at=start + timedelta(hours=i), embed=False) for i in range(5)]
    make_knowledge(task="same time as item 4", scopes=["org:cybertogether"], created_at=made[4].created_at, embed=False)
    make_knowledge(task="someone else's", scopes=["org:other"], embed=False)
    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = owner.get("/api/knowledge", params).json()
        seen += [r["task"] for r in page["results"]]
        cursor = page["next"]
        if not cursor:
            break
    assert len(seen) == 6 and len(set(seen)) == 6
    assert seen[-4:] == ["item 3", "item 2", "item 1", "item 0"]
    assert "someone else's" not in seen
    assert [r["task"] for r in outsider.get("/api/knowledge").json()["results"]] == ["someone else's"]


def test_list_filters_by_types_and_scopes(owner):
    make_knowledge(task="a plan", types=["plan"], scopes=["org:cybertogether"], embed=False)
    make_knowledge(task="a tool", types=["tool"], scopes=["org:cybertogether"], embed=False)
    assert [r["task"] for r in owner.get("/api/knowledge", {"types": "plan"}).json()["results"]] == ["a plan"]
    assert owner.get("/api/knowledge", {"scopes": "org:nowhere"}).json()["results"] == []


@pytest.mark.parametrize(("params", "field"), [({"limit": 0}, "limit"), ({"limit": 500}, "limit"), ({"cursor": "garbage!"}, "cursor"), ({"types": "gossip"}, "types")])
def test_bad_list_parameters_are_400(owner, params, field):
    response = owner.get("/api/knowledge", params)
    assert response.status_code == 400 and field in response.json()["error"]["fields"]


def test_filters_endpoint_lists_keys_with_samples_from_visible_items_only(owner):
    make_knowledge(task="t", tags={"domain": "coding_style"}, scopes=["org:cybertogether"], embed=False)
    make_knowledge(task="t", tags={"secret_project": "x"}, scopes=["org:other"], embed=False)
    body = owner.get("/api/knowledge/filters").json()
    assert "EQ" in body["operators"] and "STARTSWITH" in body["operators"]
    assert "tags.domain" in body["keys"] and "coding_style" in body["keys"]["tags.domain"]["samples"]
    assert "tags.secret_project" not in body["keys"]


def test_an_oversized_body_is_413_in_the_error_shape(owner):
    from knowledge.models import Knowledge

    response = owner.post("/api/knowledge", {"task": "t", "content": "x" * 3_000_000, "types": ["tool"]}, format="json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert not Knowledge.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_long_save_never_waits_for_the_model_says_its_vectors_are_pending_and_is_found_by_keyword(monkeypatch):
    def no_model_on_the_request_path(name=None):
        raise AssertionError("the save embedded on the request path")

    monkeypatch.setattr("knowledge.search.indexing.get_embedder", no_model_on_the_request_path)
    agent = client_for("research_agent", ["org:cybertogether"])
    body = {**SEED_SAVE_BODY, "task": "Zanzibar shipping checklist", "content": "Check the manifest twice. " * 3840}
    assert len(body["content"]) > 99_000

    response = agent.post("/api/knowledge", body, format="json")

    assert response.status_code == 201, response.json()
    assert response.json()["vector_status"] == "pending"
    found = agent.get("/api/knowledge/search", {"q": "Zanzibar", "rank": "relevance"})
    assert found.status_code == 200 and [r["id"] for r in found.json()["results"]] == [response.json()["id"]]
