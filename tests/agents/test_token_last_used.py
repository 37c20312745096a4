"""A token's `last_used_at`: kept to the minute, without a write on every request."""
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import AgentToken
from tests.callers import agent_key, client_with


def _token_writes(queries) -> list[str]:
    return [q["sql"] for q in queries if q["sql"].startswith('UPDATE "agents_agenttoken"')]


def test_first_use_of_a_token_records_when_it_was_used(db):
    client = client_with(agent_key("first_use", ("org:acme",)))
    token = AgentToken.objects.get(agent_id="first_use")
    assert token.last_used_at is None

    assert client.get("/api/knowledge").status_code == 200

    token.refresh_from_db()
    assert timezone.now() - token.last_used_at < timedelta(seconds=30)


def test_requests_within_a_minute_do_not_write_the_token_again(db):
    client = client_with(agent_key("busy_agent", ("org:acme",)))
    assert client.get("/api/knowledge").status_code == 200
    first = AgentToken.objects.get(agent_id="busy_agent").last_used_at

    with CaptureQueriesContext(connection) as queries:
        for _ in range(5):
            assert client.get("/api/knowledge").status_code == 200

    assert _token_writes(queries.captured_queries) == []
    assert AgentToken.objects.get(agent_id="busy_agent").last_used_at == first


def test_a_token_last_used_over_a_minute_ago_is_marked_again(db):
    client = client_with(agent_key("returning_agent", ("org:acme",)))
    long_ago = timezone.now() - timedelta(minutes=5)
    AgentToken.objects.filter(agent_id="returning_agent").update(last_used_at=long_ago)

    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/knowledge").status_code == 200

    assert len(_token_writes(queries.captured_queries)) == 1
    assert AgentToken.objects.get(agent_id="returning_agent").last_used_at > long_ago + timedelta(minutes=4)
