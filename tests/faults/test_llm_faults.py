"""A misbehaving LLM (too slow, junk, errors, a dropped connection) under a real worker:
evolve retries with backoff, then fails the job with a readable error; the item is untouched,
nothing is lost, and the worker stays healthy and takes the next job.

(test_evolve.py covers plain-text replies and HTTP 500 with retries that do not wait.)
"""
import pytest

from jobs.models import Job
from jobs.selectors import workers_alive
from knowledge.models import Knowledge, KnowledgeVersion
from tests.conftest import CeleryWorker, wait_for
from tests.knowledge.test_api_knowledge import client_for

pytestmark = pytest.mark.django_db(transaction=True)

BACKOFF = 1  # seconds: retries wait 1, 2, 4
GOOD = {"task": "better task", "content": "better content", "summary_of_changes": "s"}


@pytest.fixture
def acme():
    return client_for("research_agent", ["org:acme"])


@pytest.fixture
def patient_worker(fake_openai, django_db_blocker):
    """A worker whose LLM calls time out after 1 s and whose retries back off 1, 2, 4 s."""
    with django_db_blocker.unblock():
        worker = CeleryWorker(name="llm-faults", extra_env={
            "OPENAI_BASE_URL": fake_openai.base_url, "OPENAI_API_KEY": "test-key", "KNOWHUB_LLM_MODEL": "fake-model",
            "KNOWHUB_RETRY_BACKOFF_SECONDS": str(BACKOFF), "KNOWHUB_LLM_TIMEOUT_SECONDS": "1",
        }).start()
    yield worker
    worker.stop()


def evolve(client, text: str) -> tuple[str, str]:
    created = client.post("/api/knowledge", {"task": text, "content": "unchanged", "types": ["tool"]}, format="json").json()
    job = client.put(f"/api/knowledge/{created['id']}", {"evolve_feedback": "improve"}, format="json").json()["job"]
    return created["id"], job["id"]


def finished(job_id: str) -> Job | None:
    job = Job.objects.get(pk=job_id)
    return job if job.status in ("succeeded", "failed") else None


FAULTS = {
    # fault: (script it on the fake, words the job's error must contain)
    "wrong_schema": (lambda fake: fake.reply_json({"answer": "a better version"}), "did not match the evolved_knowledge schema"),
    "not_json": (lambda fake: fake.reply_text("Sure! Here is a better version:"), "did not match the evolved_knowledge schema"),
    "garbage_http_body": (lambda fake: fake.reply_garbage(), "LLM request failed"),
    "http_503": (lambda fake: fake.fail(503), "InternalServerError"),
    "dropped_connection": (lambda fake: fake.drop(), "APIConnectionError"),
    "timeout": (lambda fake: fake.stall(3), "APITimeoutError"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_a_faulty_llm_fails_the_job_readably_after_backed_off_retries_and_the_worker_takes_the_next_job(
        acme, fake_openai, patient_worker, fault):
    script, error_words = FAULTS[fault]
    for _ in range(4):
        script(fake_openai)
    item_id, job_id = evolve(acme, "keep me")
    job = wait_for(lambda: finished(job_id), timeout=90, message="the job to fail")

    assert (job.status, job.attempts) == ("failed", 4)
    assert job.error.startswith("gave up after 4 attempts: ") and error_words in job.error, job.error
    assert len(job.error) < 600 and "Traceback" not in job.error
    item = Knowledge.objects.get(pk=item_id)
    assert (item.task, item.content) == ("keep me", "unchanged") and not KnowledgeVersion.objects.exists()
    calls = [r["at"] for r in fake_openai.requests]
    gaps = [later - earlier for earlier, later in zip(calls, calls[1:])]
    assert len(calls) == 4 and all(gap >= BACKOFF * 2 ** i for i, gap in enumerate(gaps)), gaps

    fake_openai.reply_json(GOOD)
    next_item, next_job = evolve(acme, "next one")
    assert wait_for(lambda: finished(next_job), timeout=60, message="the next job").status == "succeeded"
    assert Knowledge.objects.get(pk=next_item).content == "better content"
    assert patient_worker.proc.poll() is None and workers_alive()


def test_an_llm_that_recovers_before_the_retries_run_out_finishes_the_job_once(acme, fake_openai, patient_worker):
    fake_openai.stall(3)
    fake_openai.fail(500)
    fake_openai.reply_json(GOOD)
    item_id, job_id = evolve(acme, "keep me")
    job = wait_for(lambda: finished(job_id), timeout=60, message="the job")
    assert (job.status, job.attempts, job.error) == ("succeeded", 3, "")
    assert KnowledgeVersion.objects.filter(knowledge_id=item_id).count() == 1
    assert Knowledge.objects.get(pk=item_id).content == "better content"
