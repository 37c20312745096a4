"""Connections the database drops while the stack idles (a restart, a failover, an idle-session timeout, a proxy):
the next requests get fresh ones, and the worker's beat keeps sending its periodic tasks."""
import pytest

from tests.conftest import wait_for
from tests.stack import Stack

pytestmark = pytest.mark.e2e

DROP_IDLE = ("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() "
             "AND pid <> pg_backend_pid() AND backend_type = 'client backend'")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    running = Stack(tmp_path_factory.mktemp("dropped") / "var", extra_env={"KNOWHUB_EMBED_SWEEP_SECONDS": "3"}).start()
    yield running
    running.stop()


def test_requests_after_the_database_dropped_every_idle_connection_all_succeed(stack):
    token = stack.token("idle_agent", "org:idle")
    for n in range(10):  # every web process's pool holds connections now
        assert stack.request("GET", f"/api/knowledge/search?q=warm+{n}", token=token).status == 200

    assert stack.sql(DROP_IDLE)[0][0] > 0

    statuses = [stack.request("GET", f"/api/knowledge/search?q=after+{n}", token=token).status for n in range(30)]
    assert statuses == [200] * 30


def test_the_beat_keeps_sending_periodic_tasks_after_the_database_dropped_its_connection(stack):
    token = stack.token("beat_agent", "org:beat")
    item = stack.request("POST", "/api/knowledge", {"task": "Rotate the signing keys", "content": "Every month.",
                                                    "types": ["strategy"]}, token).json()["id"]
    has_vector = f"SELECT embedding IS NOT NULL FROM knowledge_knowledge WHERE id = '{item}'"
    wait_for(lambda: stack.sql(has_vector)[0][0], timeout=120, message="the item's vector")

    stack.sql(DROP_IDLE)  # the beat's connection too
    stack.sql(f"UPDATE knowledge_knowledge SET embedding = NULL, embedding_model = '' WHERE id = '{item}'")

    # a lost embedding message: the beat's sweep (every 3 s here) sends the item to be embedded again
    wait_for(lambda: stack.sql(has_vector)[0][0], timeout=90, interval=1, message="the sweep to embed it again")
