"""The agent API of seed 003: search, save and read, with per-agent tokens and scopes."""
import base64
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


@pytest.mark.parametrize("body", [
    {"task": "t", "content": "c", "types": ["plan"]},
    {"task": "Zugang 登录 🔑", "content": "line one\nline two\t\u00e9", "types": ["tool", "strategy", "tool"],
     "tags": {"zeta": "1", "a": "", "middle_key_that_is_long": "值", "b": "two words"},
     "resource_ids": ["res-a", "res-b", "res-a"], "message_id": "msg-7",
     "source": {"urls": ["https://example.com/a?b=c"], "timestamp": "2026-11-29T10:00:00+08:00", "name": "n"},
     "eval": {"score": 5, "confidence": 0.1234567890123}},
], ids=["least", "most"])
def test_a_saves_reply_is_what_reading_the_item_back_gives(owner, body):
    """The reply is built from what was written, not read back: it must be what a GET returns, field for field."""
    from tests.factories import make_resource

    make_resource("res-a", scopes=["org:cybertogether"])
    make_resource("res-b", scopes=["org:cybertogether"])
    response = owner.post("/api/knowledge", body, format="json")
    assert response.status_code == 201, response.json()
    saved = response.json()
    assert saved["types"] == list(dict.fromkeys(body["types"]))
    assert saved["resource_ids"] == list(dict.fromkeys(body.get("resource_ids", [])))
    assert owner.get(f"/api/knowledge/{saved['id']}").json() == saved


@pytest.mark.parametrize("tags", [{"": "x"}, {"$where": "x"}, {"a b": "x"}, {"x" * 101: "x"}, {"标签": "x"},
                                  {f"t{n}": "x" for n in range(51)}],
                         ids=["empty", "dollar", "space", "too-long", "not-ascii", "too-many"])
def test_a_tag_name_filters_cannot_name_is_a_400_naming_tags_on_save_and_edit(owner, tags):
    response = owner.post("/api/knowledge", {**SEED_SAVE_BODY, "tags": tags}, format="json")
    assert response.status_code == 400 and "tags" in response.json()["error"]["fields"], response.content
    item = owner.post("/api/knowledge", SEED_SAVE_BODY, format="json").json()
    edit = owner.patch(f"/api/knowledge/{item['id']}", {"tags": tags, "reason": "r"}, format="json")
    assert edit.status_code == 400 and "tags" in edit.json()["error"]["fields"], edit.content
    bulk = owner.post("/api/knowledge/bulk", {"items": [{**SEED_SAVE_BODY, "tags": tags}]}, format="json")
    assert bulk.status_code == 200 and bulk.json()["failed"] == 1, bulk.content


def test_every_tag_name_a_save_takes_can_be_filtered_on(owner):
    tags = {"a.b": "1", "x" * 100: "2", "Mixed_Case-9": "3"}
    saved = owner.post("/api/knowledge", {**SEED_SAVE_BODY, "tags": tags}, format="json")
    assert saved.status_code == 201, saved.content
    offered = owner.get("/api/knowledge/filters").json()["keys"]
    for name, value in tags.items():
        assert f"tags.{name}" in offered
        filters = json.dumps({"op": "EQ", "key": f"tags.{name}", "value": value})
        found = owner.get("/api/knowledge/search", {"q": SEED_SAVE_BODY["task"], "filters": filters, "min_score": 1})
        assert [r["id"] for r in found.json()["results"]] == [saved.json()["id"]], found.content


def test_an_item_whose_tag_names_predate_the_rule_stays_editable_and_keeps_them(owner):
    legacy = {"领域": "编程", "a b": "x"}  # stored before tag names were held to what filters can name
    item = make_knowledge(task="old", tags=legacy, scopes=["org:cybertogether"], owner="agent:research_agent", embed=False)
    kept = owner.patch(f"/api/knowledge/{item.id}", {"tags": {**legacy, "domain": "web"}, "reason": "r"}, format="json")
    assert kept.status_code == 200 and kept.json()["tags"] == {**legacy, "domain": "web"}, kept.content
    new = owner.patch(f"/api/knowledge/{item.id}", {"tags": {**legacy, "新": "x"}, "reason": "r"}, format="json")
    assert new.status_code == 400 and "tags" in new.json()["error"]["fields"], new.content
    offered = owner.get("/api/knowledge/filters").json()["keys"]
    assert "tags.domain" in offered and not {"tags.领域", "tags.a b"} & set(offered)


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
        ({"q": "x", "filters": '{"op": "GT", "key": "created_at", "value": "0001-01-01T00:00:00+23:59"}'}, "filters"),
        ({"q": "x", "topk": 3}, "topk"),  # a misspelt parameter is refused, as in a body, not run with the default
        ({"q": "x", "top_k": ["1", "50"]}, "top_k"),  # given twice: refused, not run with the last one
        ({"q": ["deploy", "rollback"]}, "q"),
    ],
)
def test_bad_search_parameters_are_a_400_naming_the_field(owner, params, field):
    response = owner.get("/api/knowledge/search", params)
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_a_list_parameter_may_be_repeated_and_a_repeated_list_page_size_is_a_400(owner):
    owner.post("/api/knowledge", {**SEED_SAVE_BODY, "types": ["tool"]}, format="json")
    repeated = owner.get("/api/knowledge/search", {"q": SEED_SAVE_BODY["task"], "types": ["plan", "tool"], "min_score": 1})
    assert repeated.status_code == 200 and repeated.json()["count"] == 1, repeated.content
    twice = owner.get("/api/knowledge", {"limit": ["1", "2"]})
    assert twice.status_code == 400 and twice.json()["error"]["fields"] == {"limit": ["given more than once"]}


@pytest.mark.parametrize("value", ["0001-01-01T00:00:00-23:59", "9999-12-31T00:00:00-15:00", "9999-12-31", "0001-01-01"])
def test_date_filters_at_the_edges_of_the_calendar_and_offsets_the_database_refuses_are_answered(owner, value):
    owner.post("/api/knowledge", {**SEED_SAVE_BODY, "task": "deploy with helm"}, format="json")
    for op in ("GT", "LT", "EQ"):
        filters = json.dumps({"op": op, "key": "created_at", "value": value})
        response = owner.get("/api/knowledge/search", {"q": "deploy helm", "filters": filters, "min_score": 1})
        assert response.status_code == 200, response.content
        found = len(response.json()["results"])
        assert found == {"GT": int(value.startswith("0001")), "LT": int(value.startswith("9999")), "EQ": 0}[op], (op, found)


def test_a_get_may_carry_the_format_parameter_any_endpoint_takes(owner):
    assert owner.get("/api/knowledge/search", {"q": "x", "format": "json"}).status_code == 200
    assert owner.get("/api/knowledge", {"limit": 2, "format": "json"}).status_code == 200


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


@pytest.mark.parametrize("matches_nothing", [
    {"op": "IN", "key": "types", "value": []},
    {"op": "OR", "conditions": []},
    {"op": "NOT", "condition": {"op": "AND", "conditions": []}},
    {"op": "AND", "conditions": [{"op": "EQ", "key": "types", "value": "tool"}, {"op": "IN", "key": "id", "value": []}]},
    {"op": "IN", "key": "tags.domain", "value": []},
], ids=["in-empty", "or-empty", "not-and-empty", "and-with-in-empty", "tag-in-empty"])
def test_a_filter_that_can_match_nothing_finds_nothing_from_a_request_or_a_tokens_static_filters(owner, matches_nothing):
    owner.post("/api/knowledge", {**SEED_SAVE_BODY, "task": "deploy with helm", "types": ["tool"]}, format="json")
    expression = json.dumps(matches_nothing)
    for method, body in (("get", {"q": "deploy helm", "filters": expression}), ("post", {"q": "deploy helm", "filters": matches_nothing})):
        response = getattr(owner, method)("/api/knowledge/search", body, format="json" if method == "post" else None)
        assert response.status_code == 200, response.content
        assert response.json()["results"] == []
    nothing = client_for("nothing_agent", ["org:cybertogether"], static_filters=matches_nothing)
    for query in ("deploy helm", "a", ""):  # words, only a stop word, no query (the newest)
        response = nothing.get("/api/knowledge/search", {"q": query})
        assert response.status_code == 200, response.content
        assert response.json()["results"] == [], query
    assert owner.get("/api/knowledge/search", {"q": "deploy helm", "min_score": 1}).json()["count"] == 1


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


@pytest.mark.parametrize(("params", "field"), [({"limit": 0}, "limit"), ({"limit": 500}, "limit"), ({"cursor": "garbage!"}, "cursor"),
                                               ({"types": "gossip"}, "types"), ({"limt": 3}, "limt")])
def test_bad_list_parameters_are_400(owner, params, field):
    response = owner.get("/api/knowledge", params)
    assert response.status_code == 400 and field in response.json()["error"]["fields"]


def forged_cursor(created_at, item_id) -> str:
    import base64

    return base64.urlsafe_b64encode(json.dumps([created_at, item_id]).encode()).decode().rstrip("=")


@pytest.mark.parametrize("cursor", [
    forged_cursor("2026-01-01T00:00:00+00:00", "\ud800"),
    forged_cursor("2026-01-01T00:00:00+00:00", "a\u0000b"),
    forged_cursor("2026-01-01T00:00:00+00:00", "' OR 1=1 --"),
    forged_cursor("2026-01-01T00:00:00+00:00", 7),
    forged_cursor("0001-01-01T00:00:00+23:59", "knowledge-20260101-abcd"),
    forged_cursor("2026-01-01T00:00:00", "knowledge-20260101-abcd"),
    forged_cursor("not a date", "knowledge-20260101-abcd"),
    base64.urlsafe_b64encode(b'{"a": 1}').decode().rstrip("="),
], ids=["surrogate", "nul", "not-an-id", "number", "before-year-1", "naive", "not-a-date", "object"])
def test_a_forged_cursor_is_a_400_naming_the_cursor(owner, cursor):
    response = owner.get("/api/knowledge", {"cursor": cursor})
    assert response.status_code == 400, response.content
    assert "cursor" in response.json()["error"]["fields"]


def test_a_cursor_with_any_utc_offset_the_database_refuses_still_pages(owner):
    item = make_knowledge(task="old", scopes=["org:cybertogether"], embed=False)
    response = owner.get("/api/knowledge", {"cursor": forged_cursor("9999-12-31T00:00:00-23:59", "knowledge-99991231-zzzz")})
    assert response.status_code == 200, response.content
    assert [r["id"] for r in response.json()["results"]] == [item.id]
    assert owner.get("/api/knowledge", {"cursor": forged_cursor("0001-01-01T23:00:00-23:59", item.id)}).json()["results"] == []


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
