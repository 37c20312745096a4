"""Waiting for jobs with a timeout: a real worker and the loopback LLM."""
import pytest

from jobs.models import Job
from knowhub_client import JobFailed, JobTimeout


def test_waiting_times_out_while_the_job_stays_queued(hub):
    # A job row nobody sent to a broker: it stays queued (no stale message left for later tests' workers).
    job = Job.objects.create(kind="slim", requested_by="agent:research_agent", params={"writable_scopes": ["org:acme"]})
    with pytest.raises(JobTimeout) as exc:
        hub.wait_for_job(str(job.id), timeout=0.5, interval=0.1)
    assert exc.value.job["status"] == "queued" and exc.value.job["id"] == str(job.id)


def test_wait_for_job_returns_a_finished_job_and_raises_for_a_failed_one(hub, fake_openai, llm_worker):
    done = hub.wait_for_job(hub.knowledge_slim(dry_run=True), timeout=120)
    assert done["status"] == "succeeded" and done["result"]["groups"] == []

    item = hub.knowledge_save("t", "c", ["tool"])
    fake_openai.default = ("status", 400)  # the LLM refuses every request: evolve fails after its retries
    job = hub.knowledge_update(item["id"], evolve_feedback="shorter")["job"]
    with pytest.raises(JobFailed) as exc:
        hub.wait_for_job(job, timeout=120)
    assert exc.value.job["status"] == "failed" and exc.value.job["error"]
