"""Bearer tokens: who is let in, and how their use is recorded."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.auth import active_token
from agents.models import AgentToken
from tests.callers import agent_key, client_with

pytestmark = pytest.mark.django_db


def test_a_token_is_marked_used_at_most_once_a_minute_not_on_every_request():
    client = client_with(agent_key("research_agent", ["org:acme"]))
    assert client.get("/api/knowledge").status_code == 200
    first = AgentToken.objects.get().last_used_at
    assert first is not None
    with CaptureQueriesContext(connection) as captured:
        assert client.get("/api/knowledge").status_code == 200
    assert not [q for q in captured.captured_queries if q["sql"].startswith('UPDATE "agents_agenttoken"')]
    assert AgentToken.objects.get().last_used_at == first
    AgentToken.objects.update(last_used_at=first - timedelta(minutes=2))
    client.get("/api/knowledge")
    assert AgentToken.objects.get().last_used_at > first


def test_a_revoked_token_is_refused_at_once():
    key = agent_key("research_agent", ["org:acme"])
    client = client_with(key)
    assert client.get("/api/knowledge").status_code == 200
    AgentToken.objects.update(is_active=False)
    assert client.get("/api/knowledge").status_code == 401


def test_a_token_is_read_in_one_statement_with_its_fields_as_the_model_holds_them():
    key = agent_key("research_agent", ["org:acme"], writable_scopes=["org:acme"], can_curate=True,
                    static_filters={"op": "EQ", "key": "types", "value": "plan"})
    with CaptureQueriesContext(connection) as captured:
        token = active_token(key)
    assert len(captured.captured_queries) == 2  # the read, and the first use's last_used_at
    assert token == AgentToken.objects.get()
    assert token.static_filters == {"op": "EQ", "key": "types", "value": "plan"}  # JSON parsed, as the ORM gives it
    assert (token.readable_scopes, token.writable_scopes, token.can_curate) == (["org:acme"], ["org:acme"], True)
    with CaptureQueriesContext(connection) as captured:
        assert active_token(key) == token
    assert len(captured.captured_queries) == 1


@pytest.mark.parametrize("revoke", [True, False])
def test_an_unknown_or_revoked_key_finds_no_token(revoke):
    key = agent_key("research_agent", ["org:acme"])
    if revoke:
        AgentToken.objects.update(is_active=False)
    else:
        key += "x"
    assert active_token(key) is None
