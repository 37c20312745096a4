"""The job line and job metrics from Celery's signals: kind, job id, outcome, and the request id from the message."""
import logging
from types import SimpleNamespace

from prometheus_client import generate_latest

from core import request_context
from knowhub_site import job_observability
from knowhub_site.job_observability import HEADER, _job_finished, _job_started
from tests.metrics_scrape import value


class FakeTask:
    name = "knowledge.tasks.run_evolve"

    def __init__(self, request_id=None):
        self.request = SimpleNamespace(**({HEADER: request_id} if request_id else {}))

    def run(self, job_id: str) -> None:
        pass


def job_lines(caplog) -> list[dict]:
    return [r.event for r in caplog.records if r.name == "knowhub.job"]


def test_a_failed_job_is_counted_as_a_failure_of_its_kind_and_logged_with_its_job_id_and_request_id(caplog):
    before = value(generate_latest().decode(), "knowhub_jobs_total", kind="run_evolve", outcome="failure")
    task = FakeTask("client-req-0001")
    with caplog.at_level(logging.INFO):
        _job_started(task_id="task-1", task=task)
        assert request_context.current().request_id == "client-req-0001"
        _job_finished(task_id="task-1", task=task, args=("job-42",), kwargs={}, state="FAILURE")
    assert request_context.current() is None  # the worker's next task starts clean
    after = generate_latest().decode()
    assert value(after, "knowhub_jobs_total", kind="run_evolve", outcome="failure") == before + 1
    [line] = job_lines(caplog)
    assert (line["kind"], line["job_id"], line["outcome"], line["request_id"]) == ("run_evolve", "job-42", "failure", "client-req-0001")
    assert caplog.records[-1].levelname == "WARNING"


def test_a_task_sent_outside_any_request_gets_a_request_id_of_its_own(caplog):
    task = FakeTask()
    with caplog.at_level(logging.INFO):
        _job_started(task_id="task-2", task=task)
        _job_finished(task_id="task-2", task=task, args=(), kwargs={"job_id": "job-7"}, state="SUCCESS")
    [line] = job_lines(caplog)
    assert request_context.REQUEST_ID_PATTERN.match(line["request_id"]) and line["job_id"] == "job-7"
    assert job_observability.kind_of(None) == "unknown"
