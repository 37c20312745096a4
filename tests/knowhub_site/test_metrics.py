"""/metrics: who may scrape it, and that the counters and histograms move with requests, searches and LLM calls."""
import pytest

from knowledge import llm
from tests.callers import agent_client
from tests.factories import embed_saved
from tests.metrics_scrape import families, value

pytestmark = pytest.mark.django_db

OUTSIDE = "203.0.113.7"  # TEST-NET-3: never loopback, never allowed by default


def scrape(client, **extra) -> str:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return response.content.decode()


def test_an_address_outside_the_allow_list_without_the_token_is_refused_and_sees_no_metric(client, settings):
    settings.KNOWHUB_METRICS_TOKEN = "metrics-secret-token"
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong-token"}, {"HTTP_AUTHORIZATION": "metrics-secret-token"}):
        response = client.get("/metrics", REMOTE_ADDR=OUTSIDE, **headers)
        assert response.status_code == 403
        assert b"knowhub" not in response.content


@pytest.mark.parametrize("scheme", ["Bearer", "bearer"])
def test_the_token_opens_metrics_to_any_address(client, settings, scheme):
    settings.KNOWHUB_METRICS_TOKEN = "metrics-secret-token"
    text = scrape(client, REMOTE_ADDR=OUTSIDE, HTTP_AUTHORIZATION=f"{scheme} metrics-secret-token")
    assert "knowhub_embedding_backlog" in families(text)


def test_without_a_configured_token_no_bearer_value_opens_it(client, settings):
    settings.KNOWHUB_METRICS_TOKEN = ""
    assert client.get("/metrics", REMOTE_ADDR=OUTSIDE, HTTP_AUTHORIZATION="Bearer ").status_code == 403


@pytest.mark.parametrize("allow, address, allowed", [
    (["127.0.0.1", "::1"], "127.0.0.1", True),
    (["127.0.0.1", "::1"], "::1", True),
    (["127.0.0.1", "::1"], "10.0.0.5", False),
    (["10.0.0.0/8"], "10.0.0.5", True),
    (["not-an-address"], "10.0.0.5", False),
])
def test_the_allow_list_takes_addresses_and_networks(client, settings, allow, address, allowed):
    settings.KNOWHUB_METRICS_ALLOW = allow
    assert client.get("/metrics", REMOTE_ADDR=address).status_code == (200 if allowed else 403)


def test_api_requests_move_the_operation_and_http_metrics_by_name_entry_and_status(client):
    agent = agent_client("metrics_agent", ("org:acme",))
    before = scrape(client)
    saved = agent.post("/api/knowledge", {"task": "Rotate proxies", "content": "Use a pool of 20.", "types": ["tool"]},
                       format="json")
    assert saved.status_code == 201
    assert agent.get("/api/knowledge/search", {"q": "rotate proxies", "min_score": 1}).status_code == 200
    feedback = [{"knowledge_id": saved.json()["id"], "is_helpful": True}]
    assert agent.post("/api/knowledge/batch_update", {"feedback_list": feedback}, format="json").status_code == 200
    assert agent.get("/api/knowledge/knowledge-20990101-none").status_code == 404
    after = scrape(client)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    calls = "knowhub_operation_calls_total"
    assert moved(calls, operation="knowledge_save", entry="rest", status="201") == 1
    assert moved(calls, operation="knowledge_search", entry="rest", status="200") == 1
    assert moved(calls, operation="knowledge_batch_update", entry="rest", status="200") == 1
    assert moved(calls, operation="knowledge_get", entry="rest", status="404") == 1  # an error, counted by its status
    assert moved("knowhub_operation_duration_seconds_count", operation="knowledge_search", entry="rest") == 1
    assert moved("knowhub_http_request_duration_seconds_count", route="knowledge-collection", method="POST", status="2xx") == 1
    assert moved("knowhub_http_request_duration_seconds_count", route="knowledge-detail", method="GET", status="4xx") == 1
    # the save is waiting for its vector (no worker here)
    assert value(after, "knowhub_embedding_backlog") >= 1


def test_a_hybrid_search_times_each_stage(client):
    agent = agent_client("metrics_agent", ("org:acme",))
    agent.post("/api/knowledge", {"task": "Export cookies", "content": "Use the devtools.", "types": ["tool"]}, format="json")
    embed_saved()
    before = scrape(client)
    assert agent.get("/api/knowledge/search", {"q": "export cookies", "min_score": 1}).status_code == 200
    after = scrape(client)
    for stage in ("embedding", "vector", "keyword", "rerank"):
        name = "knowhub_search_stage_duration_seconds_count"
        assert value(after, name, stage=stage) - value(before, name, stage=stage) == 1, stage


def test_llm_calls_count_tokens_and_failures_by_purpose(client, fake_openai):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False}
    before = scrape(client)
    fake_openai.reply_json({"ok": True})
    llm.chat_json(system="s", user="u", schema=schema, schema_name="metrics_probe")
    fake_openai.reply_json({"unexpected": 1})
    with pytest.raises(llm.LLMError):
        llm.chat_json(system="s", user="u", schema=schema, schema_name="metrics_probe")
    fake_openai.fail(500)
    with pytest.raises(llm.LLMError):
        llm.chat_json(system="s", user="u", schema=schema, schema_name="metrics_probe")
    after = scrape(client)

    def moved(name, **labels):
        return value(after, name, purpose="metrics_probe", **labels) - value(before, name, purpose="metrics_probe", **labels)

    assert moved("knowhub_llm_calls_total", outcome="ok") == 1
    assert moved("knowhub_llm_calls_total", outcome="invalid") == 1
    assert moved("knowhub_llm_calls_total", outcome="error") == 1
    # the fake reports 1 prompt and 1 completion token per reply; the failed request reported none
    assert moved("knowhub_llm_tokens_total", kind="prompt") == 2
    assert moved("knowhub_llm_tokens_total", kind="completion") == 2
    assert moved("knowhub_llm_call_duration_seconds_count") == 3


def test_a_broker_that_cannot_be_read_is_counted_as_a_scrape_error_not_a_failed_scrape(client, monkeypatch):
    def broker_down(names):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr("knowhub_site.metrics_collectors.queue_lengths", broker_down)
    before = value(scrape(client), "knowhub_scrape_errors_total", source="broker")
    text = scrape(client)
    assert value(text, "knowhub_scrape_errors_total", source="broker") == before + 1
    assert "knowhub_celery_queue_length" not in families(text)
    assert "knowhub_embedding_backlog" in families(text)


def test_the_queue_length_is_read_from_the_broker(client):
    assert 'knowhub_celery_queue_length{queue="celery"}' in scrape(client)


@pytest.mark.django_db(transaction=True)  # _run_sync closes connections as a request's end would
def test_operations_are_counted_by_the_entry_they_came_through(client, curator):
    from api.mcp_server import _op, _run_sync
    from tests.callers import agent_key

    before = scrape(client)
    _run_sync(agent_key("mcp_agent", ("org:acme",)), _op("knowledge_search", {"q": "proxies"}))
    client.force_login(curator)
    assert client.get("/documents/").status_code == 200
    after = scrape(client)

    def moved(**labels):
        return value(after, "knowhub_operation_calls_total", **labels) - value(before, "knowhub_operation_calls_total", **labels)

    assert moved(operation="knowledge_search", entry="mcp", status="200") == 1
    assert moved(operation="document_list", entry="ui", status="200") == 1
