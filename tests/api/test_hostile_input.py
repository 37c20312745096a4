"""Input PostgreSQL or the stack cannot take gets a JSON 4xx naming the field, never a 500 (issue 12, item 6)."""
import json

import pytest
from rest_framework.test import APIClient

from api.mcp_server import _op, _Refused, _run_sync
from agents.models import AuditEvent
from knowledge.models import FeedbackCase, Knowledge
from resources.models import Resource
from tests.api.conftest import client_with, token
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db

SAVE = {"task": "Log in", "content": "Use the test account", "types": ["tool"]}


def nested(depth: int, leaf="x") -> dict:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def post_raw(client, url: str, text: str):
    return client.generic("POST", url, text.encode(), content_type="application/json")


def assert_invalid(response, field: str, status: int = 400) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["message"].startswith(f"{field}: "), error["message"]
    return error


def test_a_nul_in_a_tag_key_is_a_400_naming_the_tag_and_nothing_is_saved(agent):
    response = agent.post("/api/knowledge", {**SAVE, "tags": {"dom\x00ain": "web"}}, format="json")
    error = assert_invalid(response, "tags.dom\ufffdain")
    assert error["code"] == "invalid" and "NUL" in error["message"]
    assert not Knowledge.objects.exists() and not AuditEvent.objects.exists()


def test_a_nul_in_a_case_key_or_value_is_a_400_naming_it(agent):
    item = make_knowledge()
    value = agent.put(f"/api/knowledge/{item.id}", {"add_helpful_case": {"task": "a\x00b"}}, format="json")
    assert_invalid(value, "add_helpful_case.task")
    key = agent.put(f"/api/knowledge/{item.id}", {"add_harmful_case": {"\x00": "x"}}, format="json")
    assert_invalid(key, "add_harmful_case.\ufffd")
    assert not FeedbackCase.objects.exists()


def test_a_nul_in_resource_metadata_is_a_400_naming_the_member(agent):
    response = agent.post("/api/resource", {"id": "code/x", "title": "x", "metadata": {"note": ["ok", "\x00"]}},
                          format="json")
    assert_invalid(response, "metadata.note.1")
    assert not Resource.objects.exists()


def test_a_lone_surrogate_in_a_body_is_a_400_naming_the_field(agent):
    response = post_raw(agent, "/api/knowledge", json.dumps({**SAVE, "task": "\ud800"}))
    assert "surrogate" in assert_invalid(response, "task")["message"]


def test_a_nul_in_a_filter_value_is_a_400_naming_filters_in_a_query_string_and_in_a_body(agent):
    expression = {"op": "EQ", "key": "tags.domain", "value": "we\x00b"}
    query = agent.get("/api/knowledge/search", {"q": "login", "filters": json.dumps(expression)})
    assert "NUL" in assert_invalid(query, "filters")["message"]
    body = agent.post("/api/knowledge/search", {"q": "login", "filters": expression}, format="json")
    assert_invalid(body, "filters.value")


def test_a_nul_in_a_query_parameter_is_a_400_naming_it(agent):
    assert_invalid(agent.get("/api/knowledge/search", {"q": "a\x00b"}), "q")
    assert_invalid(agent.get("/api/knowledge", {"scopes": "org:\x00"}), "scopes")


@pytest.mark.parametrize("url, field", [
    ("/api/knowledge/search?q=%FF%FEabc", "q"),
    ("/api/knowledge/search?q=ok&top_k=5&types=tool%C0%80", "types"),  # an overlong encoding of NUL
    ("/api/knowledge?scopes=org:%FF", "scopes"),
    ("/api/export?scopes=org:%FF", "scopes"),
    ("/api/knowledge/knowledge-20260101-abcd?x%FF=1", "x\ufffd"),  # the name itself
])
def test_a_query_parameter_that_is_not_utf8_is_a_400_naming_it_not_run_as_u_fffd(agent, url, field):
    assert_invalid(agent.get(url), field)


def test_percent_encoded_utf8_in_a_query_parameter_is_read_as_the_text_it_encodes(agent):
    response = agent.get("/api/knowledge/search?q=%E5%88%B6%E8%A1%A8%E7%AC%A6+caf%C3%A9")
    assert response.status_code == 200, response.content[:300]


def test_a_nul_in_an_id_in_the_path_is_a_json_404(agent):
    for url in ("/api/knowledge/%00", "/api/knowledge/knowledge-20260101-ab%00", "/api/resource/code/a%00b"):
        response = agent.get(url)
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found", url


def test_json_nested_a_thousand_levels_is_a_400_naming_where(agent):
    response = agent.post("/api/resource", {"id": "code/deep", "title": "deep", "metadata": nested(900)},
                          format="json")
    error = assert_invalid(response, "metadata" + ".a" * 31)
    assert "deeper than 32 levels" in error["message"]
    assert not Resource.objects.exists() and not AuditEvent.objects.exists()


def test_json_deeper_than_the_decoder_can_go_is_a_400_naming_where(agent):
    response = post_raw(agent, "/api/knowledge", "[" * 100_000 + "]" * 100_000)
    assert "deeper than 32 levels" in assert_invalid(response, ".".join(["0"] * 32))["message"]


@pytest.mark.parametrize("text, field", [
    ('{"task": "Log in", "content": "c", "types": ["tool"], "task": "Log out"}', "task"),
    ('{"task": "t", "content": "c", "types": ["tool"], "tags": {"env": "prod", "env": "dev"}}', "env"),
])
def test_an_object_holding_a_key_twice_is_a_400_naming_the_key_not_run_with_the_last(agent, text, field):
    assert "given more than once" in assert_invalid(post_raw(agent, "/api/knowledge", text), field)["message"]
    assert not Knowledge.objects.exists()


def test_json_whose_keys_differ_only_in_case_or_nesting_is_parsed_as_before(agent):
    text = '{"task": "t", "content": "c", "types": ["tool"], "tags": {"task": "x", "Task": "y"}}'
    response = post_raw(agent, "/api/knowledge", text)
    assert response.status_code == 201, response.content
    assert response.json()["tags"] == {"task": "x", "Task": "y"}


def test_filters_nested_1300_levels_in_a_query_string_are_a_400(agent):
    deep = '{"op": "NOT", "condition": ' * 1300 + '{"op": "EQ", "key": "score", "value": 3}' + "}" * 1300
    assert_invalid(agent.get("/api/knowledge/search", {"q": "x", "filters": deep}), "filters")


HUGE_NUMBER = "9" * 4301  # past Python's int_max_str_digits: json.loads raises a ValueError, not a JSONDecodeError


@pytest.mark.parametrize("text", [
    '{"op": "GT", "key": "score", "value": %s}' % HUGE_NUMBER,
    '{"op": "IN", "key": "score", "value": [1, %s]}' % HUGE_NUMBER,
    "[%s]" % HUGE_NUMBER,
])
def test_filters_holding_an_integer_of_thousands_of_digits_are_a_400_naming_filters(agent, text):
    for response in (agent.get("/api/knowledge/search", {"q": "x", "filters": text}),
                     agent.post("/api/knowledge/search", {"q": "x", "filters": text}, format="json")):
        error = assert_invalid(response, "filters")
        assert error["code"] == "invalid" and "4300 digits" in error["message"], error
        assert "sys." not in error["message"]  # not Python's advice to its programmer


def test_filters_nested_within_the_json_limit_meet_the_filter_parser_depth_limit(agent):
    deep = {"op": "EQ", "key": "score", "value": 3}
    for _ in range(20):
        deep = {"op": "NOT", "condition": deep}
    response = agent.post("/api/knowledge/search", {"q": "x", "filters": deep}, format="json")
    assert "deeper than 8 levels" in assert_invalid(response, "filters")["message"]


def test_a_batch_with_a_nul_knowledge_id_is_a_400_naming_the_entry_and_nothing_lands(agent):
    item = make_knowledge()
    feedback = [{"knowledge_id": item.id, "is_helpful": True}, {"knowledge_id": "knowledge-\x00", "is_helpful": True}]
    response = agent.post("/api/knowledge/batch_update", {"feedback_list": feedback}, format="json")
    assert_invalid(response, "feedback_list.1.knowledge_id")
    assert not FeedbackCase.objects.exists() and not AuditEvent.objects.exists()


@pytest.mark.parametrize("url", ["/api/nothing-here", "/api/knowledge/search/extra", "/api/jobs/not-a-uuid"])
def test_an_unrouted_api_path_is_a_json_404(agent, url):
    response = agent.get(url)
    assert response.status_code == 404 and response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == "not_found"


def test_a_write_to_an_unrouted_api_path_with_a_session_cookie_is_a_json_404_not_a_csrf_page():
    client = APIClient(enforce_csrf_checks=True)
    client.cookies["sessionid"] = "whatever"
    response = client.put("/api/knowledge/a%2Fb", {}, format="json")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("value", ["", "yes", "on", "2", "True "])
def test_reveal_takes_only_true_false_1_or_0(agent, value):
    Resource.objects.create(id="code/r", title="r", scopes=["org:acme"], secure_body="s3cret")
    assert_invalid(agent.get("/api/resource/code/r", {"reveal": value}), "reveal")


def test_reveal_true_and_1_reveal_and_false_and_0_do_not(agent):
    Resource.objects.create(id="code/r", title="r", scopes=["org:acme"], secure_body="s3cret")
    for value, shown in (("true", True), ("1", True), ("false", False), ("0", False)):
        body = agent.get("/api/resource/code/r", {"reveal": value}).json()
        assert ("secure_body" in body) is shown, value


@pytest.mark.parametrize("value", ["true", 1, 0, "yes", None])
def test_dry_run_in_a_body_must_be_a_json_boolean(agent, value):
    assert_invalid(agent.post("/api/knowledge/slim", {"dry_run": value}, format="json"), "dry_run")


def test_is_helpful_in_a_batch_must_be_a_json_boolean(agent):
    item = make_knowledge()
    response = agent.post("/api/knowledge/batch_update",
                          {"feedback_list": [{"knowledge_id": item.id, "is_helpful": "yes"}]}, format="json")
    result = response.json()["results"][0]
    assert response.status_code == 200 and not result["ok"]
    assert result["error"]["message"].startswith("feedback_list.0.is_helpful: ")


@pytest.mark.parametrize("query", [{"scopes": ","}, {"scopes": "org:acme,"}, {"types": ","}])
def test_empty_names_in_a_comma_list_are_a_400(agent, query):
    assert_invalid(agent.get("/api/knowledge", query), next(iter(query)))


LONG_SCOPE = "org:" + "a" * 197  # 201 characters


@pytest.mark.parametrize(("field", "value", "named"), [
    ("scopes", [f"org:team{n}" for n in range(51)], "scopes"),  # more than an item may hold
    ("scopes", ["org:acme", LONG_SCOPE], "scopes.1"),
    ("scopes", ["acme"], "scopes"),  # not kind:name
    ("types", ["tool"] * 7, "types"),  # more than there are types
    ("types", ["nonsense"], "types.0"),
])
@pytest.mark.parametrize("request_", ["search GET", "search POST", "list GET"])
def test_search_and_list_refuse_too_many_too_long_or_malformed_names(agent, field, value, named, request_):
    if request_ == "search GET":
        response = agent.get("/api/knowledge/search", {"q": "x", field: ",".join(value)})
    elif request_ == "search POST":
        response = agent.post("/api/knowledge/search", {"q": "x", field: value}, format="json")
    else:
        response = agent.get("/api/knowledge", {field: ",".join(value)})
    assert_invalid(response, named)


def test_a_search_with_thousands_of_long_scopes_is_refused_and_logs_nothing(agent):
    from knowledge.models import SearchLog

    scopes = [f"org:{n:0>196}" for n in range(12_000)]  # ~2.4 MB: once a 200 and a 2.4 MB search log row
    assert "no more than 50" in assert_invalid(
        agent.post("/api/knowledge/search", {"q": "x", "scopes": scopes}, format="json"), "scopes")["message"]
    assert_invalid(agent.get("/api/knowledge/search", {"q": "x", "scopes": ",".join(scopes[:2_000])}), "scopes")
    assert not SearchLog.objects.exists()


def test_fifty_scopes_and_every_type_are_still_taken(agent):
    scopes = ["org:acme", *(f"team:t{n}" for n in range(49))]
    types = ["user_profile", "strategy", "tool", "usecase", "definition", "plan"]
    for response in (agent.get("/api/knowledge/search", {"q": "x", "scopes": ",".join(scopes), "types": ",".join(types)}),
                     agent.post("/api/knowledge/search", {"q": "x", "scopes": scopes, "types": types}, format="json"),
                     agent.get("/api/knowledge", {"scopes": ",".join(scopes), "types": ",".join(types)})):
        assert response.status_code == 200, response.content[:300]


MANY_SCOPES = [f"org:team{n}" for n in range(51)]


@pytest.mark.parametrize(("method", "url", "body", "named"), [
    ("post", "/api/knowledge", {**SAVE, "types": ["tool"] * 7}, "types"),
    ("post", "/api/knowledge", {**SAVE, "resource_ids": [f"res-{n}" for n in range(101)]}, "resource_ids"),
    ("patch", "/api/knowledge/{item}", {"types": ["tool"] * 7}, "types"),
    ("post", "/api/resource", {"id": "r1", "title": "r", "body": "b", "scopes": MANY_SCOPES}, "scopes"),
    ("get", "/api/export", {"scopes": ",".join(MANY_SCOPES)}, "scopes"),
    ("post", "/api/import", {"content": "# a\n\nb\n", "filename": "a.md", "scopes": MANY_SCOPES}, "scopes"),
    ("post", "/api/import", {"content": "# a\n\nb\n", "filename": "a.md", "types": ["tool"] * 7}, "types"),
    ("post", "/api/documents", {"content": "# a\n\nb\n", "filename": "a.md", "scopes": MANY_SCOPES}, "scopes"),
    ("post", "/api/documents", {"content": "# a\n\nb\n", "filename": "a.md", "types": ["tool"] * 7}, "types"),
])
def test_every_list_an_input_takes_is_bounded_and_a_longer_one_is_a_400_naming_it(agent, method, url, body, named):
    """Found by the 50-client sweep: an export took thousands of scopes, a save thousands of resource ids."""
    item = make_knowledge(owner="agent:fuzz_agent")
    if url == "/api/import":  # a curator's operation
        agent = client_with(token(can_curate=True, writable_scopes=["org:acme"]))
    before = (Knowledge.objects.count(), Resource.objects.count(), AuditEvent.objects.count())
    url = url.format(item=item.id)
    response = agent.get(url, body) if method == "get" else getattr(agent, method)(url, body, format="json")
    assert "no more than" in assert_invalid(response, named)["message"]
    assert (Knowledge.objects.count(), Resource.objects.count(), AuditEvent.objects.count()) == before
    stored = Knowledge.objects.get(id=item.id)
    assert (stored.types, stored.updated_at) == (["tool"], item.updated_at)


def test_an_empty_scope_in_a_json_list_is_a_400(agent):
    assert_invalid(agent.post("/api/knowledge/search", {"q": "x", "scopes": [""]}, format="json"), "scopes")
    assert_invalid(agent.post("/api/knowledge", {**SAVE, "scopes": [""]}, format="json"), "scopes.0")


@pytest.mark.parametrize("url", ["javascript:alert(1)", "data:text/html,x", "file:///etc/passwd", "//evil.example",
                                 "http://"])
def test_source_urls_must_be_http_or_https(agent, url):
    response = agent.post("/api/knowledge", {**SAVE, "source": {"urls": ["https://ok.example", url]}}, format="json")
    assert_invalid(response, "source.urls.1")
    assert not Knowledge.objects.exists()


def test_http_and_https_source_urls_are_kept(agent):
    urls = ["https://example.com/a?b=1", "HTTP://example.com"]
    response = agent.post("/api/knowledge", {**SAVE, "source": {"urls": urls}}, format="json")
    assert response.status_code == 201 and response.json()["source"]["urls"] == urls


def test_too_many_query_parameters_are_a_json_400(agent, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10
    response = agent.get("/api/knowledge/search?" + "&".join(f"p{i}=1" for i in range(20)))
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid"


@pytest.mark.django_db(transaction=True)  # _run_sync closes connections as a request's end would
def test_mcp_tools_refuse_the_same_input_naming_the_field():
    key = token()
    save = _op("knowledge_save", {**SAVE, "tags": {"a": "b\x00"}})
    with pytest.raises(_Refused) as refused:
        _run_sync(key, save)
    assert refused.value.error["status"] == 400 and refused.value.error["message"].startswith("tags.a: ")
    for lookup, field in ((_op("knowledge_get", knowledge_id="knowledge-\x00"), "knowledge_id"),
                          (_op("resource_get", {}, resource_id="a\x00"), "resource_id")):
        with pytest.raises(_Refused) as refused:
            _run_sync(key, lookup)
        assert refused.value.error["status"] == 400 and refused.value.error["message"].startswith(f"{field}: ")
    with pytest.raises(_Refused) as refused:
        _run_sync(key, _op("job_get", job_id="not-a-uuid"))
    assert refused.value.error["status"] == 404
