"""Three Celery queues: a save's embeddings, its conflict checks and everything else. A worker takes from each in turn, so a job queued
behind a backlog of embeddings (an import, a large document) starts at once instead of after the whole backlog."""
import json

import pytest

from ingest import imports
from jobs.models import Job
from knowhub_site.celery import app
from knowledge.tasks import embed_knowledge
from tests.callers import acting
from tests.conftest import CeleryWorker, wait_for

BACKLOG = 150


def test_embeddings_and_conflict_checks_go_to_their_own_queues_and_every_other_task_to_the_default_one():
    route = app.amqp.router.route

    assert route({}, "knowledge.tasks.embed_knowledge", (), {})["queue"].name == "embeddings"
    assert route({}, "knowledge.tasks.embed_pending", (), {})["queue"].name == "embeddings"
    assert route({}, "knowledge.tasks.detect_conflicts", (), {})["queue"].name == "checks"
    for task in ("ingest.tasks.run_import", "knowledge.tasks.run_evolve", "webhooks.tasks.send_delivery"):
        assert route({}, task, (), {})["queue"].name == "celery", task
    # what a worker started without -Q consumes (app.amqp.queues also gains any queue a test sent to by name)
    assert [queue.name for queue in app.conf.task_queues] == ["celery", "embeddings", "checks"]


@pytest.mark.django_db(transaction=True)
def test_a_job_queued_behind_a_backlog_of_embeddings_runs_before_the_backlog_drains(tmp_path):
    for number in range(BACKLOG):  # the backlog first: with one queue the job would wait for every one of them
        embed_knowledge.delay([f"knowledge-20260101-{number:04x}"])
    job = imports.import_request(acting("agent:importer"), name="tips.csv", scopes=["org:acme"],
                                 data=b"task,content,types\nRotate keys,Every month,strategy\n")
    log = tmp_path / "worker.log"
    worker = CeleryWorker(log_path=log, loglevel="info").start()
    try:
        wait_for(lambda: Job.objects.get(pk=job.pk).status in ("succeeded", "failed"), timeout=120,
                 message="the import job to end")
    finally:
        worker.stop()
        app.control.purge()

    assert Job.objects.get(pk=job.pk).status == "succeeded"
    finished = [line["task"] for line in map(json_line, log.read_text().splitlines())
                if line.get("logger") == "knowhub.job"]  # one line per task run, in the order they ended
    assert "ingest.tasks.run_import" in finished, finished[:5]
    assert finished.index("ingest.tasks.run_import") < 5, f"it ran after {finished.index('ingest.tasks.run_import')} others"


def json_line(text: str) -> dict:
    try:
        return json.loads(text)
    except ValueError:  # the worker's banner
        return {}
