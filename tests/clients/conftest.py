"""A live KnowHub (pytest-django's live server: real HTTP, real database) and clients with real tokens."""
import pytest

from tests.callers import agent_key


@pytest.fixture
def token_for(transactional_db):
    def make(agent_id="research_agent", scopes=("org:acme",), **kwargs) -> str:
        return agent_key(agent_id, scopes, **kwargs)

    return make


@pytest.fixture
def hub_for(live_server, token_for):
    from knowhub_client import KnowHub, RetryPolicy

    clients = []

    def make(agent_id="research_agent", scopes=("org:acme",), retry=RetryPolicy(retries=3, backoff=0.01), **kwargs):
        client = KnowHub(live_server.url, token=token_for(agent_id, scopes, **kwargs), retry=retry, timeout=30)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def hub(hub_for):
    """research_agent reading and writing org:acme, allowed to reveal secrets."""
    return hub_for(can_read_secrets=True)
