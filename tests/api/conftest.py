"""Clients and a live server for the hostile-input, audit and fuzz tests of the agent API."""
import pytest
from rest_framework.test import APIClient

from tests.callers import agent_key, client_with  # noqa: F401 - client_with is these tests' name too


def token(agent_id="fuzz_agent", scopes=("org:acme",), **kwargs) -> str:
    return agent_key(agent_id, scopes, **kwargs)


@pytest.fixture
def agent(db) -> APIClient:
    """An agent reading and writing org:acme, allowed to reveal secrets."""
    return client_with(token(can_read_secrets=True))
