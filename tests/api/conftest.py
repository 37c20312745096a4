"""Clients and a live server for the hostile-input, audit and fuzz tests of the agent API."""
import pytest
from rest_framework.test import APIClient

from agents.services import agent_token_create


def token(agent_id="fuzz_agent", scopes=("org:acme",), **kwargs) -> str:
    return agent_token_create(agent_id=agent_id, readable_scopes=list(scopes), **kwargs)[1]


def client_with(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def agent(db) -> APIClient:
    """An agent reading and writing org:acme, allowed to reveal secrets."""
    return client_with(token(can_read_secrets=True))
