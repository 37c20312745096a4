"""The broker (Redis) stopped and restarted: saves and jobs asked for meanwhile are answered, and
nothing is lost: the worker reconnects, the items get their vectors, the job runs once."""
import subprocess

import pytest

from tests.conftest import wait_for
from tests.fake_openai import FakeOpenAI
from tests.stack import Stack, free_port

pytestmark = pytest.mark.e2e


def redis_server(port: int) -> subprocess.Popen:
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL)
    wait_for(lambda: subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).stdout.strip() == b"PONG",
             timeout=20, message="redis to start")
    return proc


def test_the_broker_stopped_and_restarted_loses_no_save_and_no_job(tmp_path):
    port = free_port()
    redis = redis_server(port)
    llm = FakeOpenAI().start()
    llm.default = ("json", {"task": "Restart the worker after every deploy", "content": "Run the restart script, then check /healthz.",
                            "summary_of_changes": "health check"})
    stack = Stack(tmp_path / "var", extra_env={
        "CELERY_BROKER_URL": f"redis://127.0.0.1:{port}/0", "KNOWHUB_JOB_RESEND_SECONDS": "5",
        "KNOWHUB_EMBED_SWEEP_SECONDS": "3", "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test-key",
        "KNOWHUB_LLM_MODEL": "fake-model",
    })
    try:
        stack.start()
        token = stack.token("ops_agent", "org:ops")
        first = stack.request("POST", "/api/knowledge", {"task": "Restart the worker", "content": "Run the restart script.",
                                                         "types": ["strategy"]}, token).json()["id"]

        redis.terminate()
        redis.wait(10)
        saved = [stack.request("POST", "/api/knowledge", {"task": f"Rotate log file {n}", "content": "Use logrotate.",
                                                          "types": ["tool"]}, token) for n in range(3)]
        evolve = stack.request("PUT", f"/api/knowledge/{first}", {"evolve_feedback": "mention the health check"}, token)
        health = stack.request("GET", "/healthz")

        assert [r.status for r in saved] == [201, 201, 201]
        # No assertion on their vector_status here: a periodic sweep the worker had already taken
        # from the broker before it stopped may embed them before the reply is written. What
        # matters is below: every one of them gets its vector once the broker is back.
        assert evolve.status == 200 and evolve.json()["job"]["status"] == "queued"
        assert health.status == 503 and "broker" in health.json()["down"]

        redis = redis_server(port)  # the same address, empty: every message sent before is gone
        wait_for(stack.healthy, timeout=120, interval=1, message="the worker to reconnect")
        job = evolve.json()["job"]["id"]
        wait_for(lambda: stack.request("GET", f"/api/jobs/{job}", token=token).json()["status"] == "succeeded",
                 timeout=120, interval=1, message="the evolve job asked for during the outage to run")
        for reply in saved:
            wait_for(lambda: stack.request("GET", f"/api/knowledge/{reply.json()['id']}", token=token).json()["vector_status"]
                     == "ready", timeout=120, interval=1, message="items saved during the outage to get vectors")
        evolved = stack.request("GET", f"/api/knowledge/{first}", token=token).json()
        assert evolved["task"] == "Restart the worker after every deploy"
        assert stack.request("GET", f"/api/jobs/{job}", token=token).json()["attempts"] == 1
        evolve_calls = [r for r in llm.requests if "chat" in r["path"]
                        and r["body"]["response_format"]["json_schema"]["name"] == "evolved_knowledge"]
        assert len(evolve_calls) == 1  # the job ran once
    finally:
        stack.stop()
        llm.stop()
        redis.terminate()
