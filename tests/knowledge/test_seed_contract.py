"""Where the seed's contract (seed 003, seed 004, Agno's agentic filters) and the API used to differ."""
import pytest

from agents.builtin_filters import REDACTED, redact_secrets
from agents.chain import Continue, Error, Filter, registered_temporarily
from api.mcp_server import _op, _run_sync
from knowledge.models import Knowledge
from tests.api.conftest import client_with, token
from tests.factories import embed_saved, make_knowledge, make_resource

SAVE = {"task": "Log in to site A", "content": "Use the test account", "types": ["tool"]}


@pytest.fixture
def agent(db):
    return client_with(token(agent_id="research_agent", writable_scopes=["org:acme"]))


def test_eval_score_and_confidence_are_kept_on_save(agent):
    saved = agent.post("/api/knowledge", {**SAVE, "eval": {"score": 4, "confidence": 0.9}}, format="json")
    assert saved.status_code == 201, saved.json()
    assert (saved.json()["eval"]["score"], saved.json()["eval"]["confidence"]) == (4, 0.9)
    assert Knowledge.objects.get().confidence == 0.9


def test_counters_cannot_be_set_on_save_and_two_different_scores_are_refused(agent):
    inflated = agent.post("/api/knowledge", {**SAVE, "eval": {"helpful": 50}}, format="json")
    assert inflated.status_code == 400 and inflated.json()["error"]["message"].startswith("eval.helpful: ")
    both = agent.post("/api/knowledge", {**SAVE, "score": 2, "eval": {"score": 5}}, format="json")
    assert both.status_code == 400 and both.json()["error"]["message"].startswith("eval.score: ")
    assert not Knowledge.objects.exists()


def test_message_id_is_filled_from_the_source_and_the_source_from_it(agent):
    from_source = agent.post("/api/knowledge", {**SAVE, "source": {"message_id": "msg-1"}}, format="json").json()
    assert (from_source["message_id"], from_source["source"]["message_id"]) == ("msg-1", "msg-1")
    from_top = agent.post("/api/knowledge", {**SAVE, "message_id": "msg-2"}, format="json").json()
    assert (from_top["message_id"], from_top["source"]["message_id"]) == ("msg-2", "msg-2")
    clash = agent.post("/api/knowledge", {**SAVE, "message_id": "a", "source": {"message_id": "b"}}, format="json")
    assert clash.status_code == 400 and clash.json()["error"]["message"].startswith("message_id: ")


def test_secure_resource_id_is_kept_and_must_name_a_readable_resource(agent):
    make_resource("credentials/site_a", content_type="credential", secure_body="pw", scopes=["org:acme"])
    saved = agent.post("/api/knowledge", {**SAVE, "secure_resource_id": "credentials/site_a"}, format="json")
    assert saved.status_code == 201 and saved.json()["secure_resource_id"] == "credentials/site_a"
    assert agent.get(f"/api/knowledge/{saved.json()['id']}").json()["secure_resource_id"] == "credentials/site_a"
    unknown = agent.post("/api/knowledge", {**SAVE, "secure_resource_id": "credentials/nope"}, format="json")
    assert unknown.status_code == 400 and unknown.json()["error"]["message"].startswith("secure_resource_id: ")


@pytest.mark.parametrize("method, path, body, field", [
    ("post", "/api/knowledge", {**SAVE, "socre": 4}, "socre"),
    ("post", "/api/knowledge", {**SAVE, "source": {"nmae": "x"}}, "source.nmae"),
    ("post", "/api/knowledge/search", {"q": "login", "topk": 3}, "topk"),
    ("post", "/api/knowledge/slim", {"dryrun": True}, "dryrun"),
    ("post", "/api/resource", {"id": "code/a", "title": "a", "bdy": "x"}, "bdy"),
])
def test_an_unknown_body_field_is_a_400_naming_it_and_nothing_is_stored(agent, method, path, body, field):
    response = getattr(agent, method)(path, body, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["message"].startswith(f"{field}: unknown field")
    assert not Knowledge.objects.exists()


def test_an_unknown_field_of_a_feedback_entry_fails_that_entry_only(agent):
    item = make_knowledge()
    body = {"feedback_list": [{"knowledge_id": item.id, "is_helpful": True},
                              {"knowledge_id": item.id, "is_helpful": True, "helpfull": True}]}
    reply = agent.post("/api/knowledge/batch_update", body, format="json").json()
    assert (reply["succeeded"], reply["failed"]) == (1, 1)
    assert reply["results"][1]["error"]["message"].startswith("feedback_list.1.helpfull: ")


def test_a_body_that_is_not_json_is_a_400_that_says_where(agent):
    response = agent.post("/api/knowledge", '{"task": ', content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["message"].startswith("non_field_errors: ")


@pytest.mark.django_db(transaction=True)  # _run_sync closes connections as a request's end would
def test_agnos_agentic_filter_list_narrows_rest_and_mcp_searches():
    key = token(agent_id="research_agent", writable_scopes=["org:acme"])
    make_knowledge(task="Log in to the web shop", tags={"domain": "web"})
    make_knowledge(task="Log in to the database shell", tags={"domain": "db"})
    embed_saved()
    agentic = [{"key": "tags.domain", "value": "web"}]

    rest = client_with(key).post("/api/knowledge/search", {"q": "log in", "filters": agentic, "rank": "relevance"},
                                 format="json").json()
    mcp = _run_sync(key, _op("knowledge_search", {"q": "log in", "filters": agentic, "rank": "relevance"}))

    for reply in (rest, mcp):
        assert [hit["tags"]["domain"] for hit in reply["results"]] == ["web"]


def test_post_invocation_filters_see_the_original_arguments_and_the_filtered_ones(agent):
    seen = {}

    def look(ctx):
        seen.update(original=ctx["args"], filtered=ctx["filtered_args"])
        return Continue(ctx)

    with registered_temporarily(Filter("look", "post_invocation", look)):
        assert agent.get("/api/knowledge/search", {"q": "login", "top_k": "7"}).status_code == 200
    assert seen["original"]["data"]["top_k"] == "7"  # as the caller sent it (seed 004)
    assert seen["filtered"]["top_k"] == 7 and "data" not in seen["filtered"]


@pytest.mark.parametrize("retry_after, header", [(None, "1"), (30, "30")])
def test_a_429_from_a_filter_carries_retry_after(agent, retry_after, header):
    limit = Filter("limit", "pre_invocation", lambda ctx: Error("slow down", status=429, code="rate_limited",
                                                                 retry_after=retry_after))
    with registered_temporarily(limit):
        response = agent.get("/api/knowledge/search", {"q": "x"})
    assert response.status_code == 429 and response["Retry-After"] == header


def test_a_secret_is_redacted_wherever_it_appears_inside_text():
    secret = "账号:user@example.com\n密码:SecurePass123"
    cookie = "session_id=abc123; auth_token=xyz789"
    text = ("log in as user@example.com with SecurePass123, then send auth_token=xyz789 (session abc123); "
            "the whole thing: 账号:user@example.com")
    ctx = {"context": {"secrets": [secret, cookie]}, "messages": [{"role": "user", "content": text}]}

    sent = redact_secrets(ctx).context["messages"][0]["content"]

    for fragment in ("user@example.com", "SecurePass123", "xyz789", "abc123"):
        assert fragment not in sent
    assert sent.startswith("log in as " + REDACTED)
