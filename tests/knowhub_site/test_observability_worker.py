"""Through a real Celery worker: a save's request id reaches the embedding job's JSON log lines, and the job is counted."""
import json

import pytest

from knowhub_site.metrics_endpoint import exposition
from knowledge.models import Knowledge
from tests.callers import agent_key, client_with
from tests.conftest import CeleryWorker, wait_for
from tests.metrics_scrape import value

REQUEST_ID = "client-req-worker-0001"


@pytest.fixture
def observed_worker(tmp_path, django_db_setup, django_db_blocker):
    """A worker writing JSON log lines to a file and its metrics to a multiprocess directory."""
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    with django_db_blocker.unblock():
        worker = CeleryWorker(name="observed-worker", log_path=tmp_path / "worker.log", loglevel="info", extra_env={
            "LOG_FORMAT": "json", "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}).start()
    yield worker
    worker.stop()


def json_lines(path) -> list[dict]:
    """The worker's log lines, each of which must parse as a JSON object (its start-up banner and Python's
    warnings, written before logging is set up, are not log lines)."""
    text = path.read_text(errors="replace") if path.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.mark.django_db(transaction=True)
def test_a_saves_request_id_is_on_the_embedding_jobs_json_log_lines_and_the_job_is_counted(observed_worker):
    agent = client_with(agent_key("log_agent", ("org:acme",)))
    saved = agent.post("/api/knowledge", {"task": "Rotate proxies", "content": "Use a pool of 20 proxies.", "types": ["tool"]},
                       format="json", HTTP_X_REQUEST_ID=REQUEST_ID)
    assert saved.status_code == 201 and saved["X-Request-ID"] == REQUEST_ID

    def job_line():
        return next((line for line in json_lines(observed_worker.log_path)
                     if line.get("event") == "job" and line.get("kind") == "embed_knowledge"
                     and line.get("request_id") == REQUEST_ID), None)

    line = wait_for(job_line, timeout=120, message="the embedding job's log line")
    assert line["outcome"] == "success" and line["duration_ms"] > 0 and line["task_id"]
    assert Knowledge.objects.get(pk=saved.json()["id"]).embedding is not None
    assert line["level"] == "INFO" and line["logger"] == "knowhub.job"

    text = exposition(observed_worker.env["PROMETHEUS_MULTIPROC_DIR"]).decode()
    assert value(text, "knowhub_jobs_total", kind="embed_knowledge", outcome="success") >= 1
    assert value(text, "knowhub_job_duration_seconds_count", kind="embed_knowledge") >= 1
