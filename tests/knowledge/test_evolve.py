"""Evolve through the API, the real worker and broker, and a loopback OpenAI-compatible server."""
import pytest

from jobs.models import Job
from knowledge.models import Knowledge, KnowledgeVersion
from tests.conftest import wait_for
from tests.knowledge.test_api_knowledge import client_for

SECRET = "hunter2-Sup3rSecret"


def finished(client, job_url):
    body = client.get(job_url).json()
    return body if body["status"] in ("succeeded", "failed") else None


@pytest.fixture
def acme():
    return client_for("research_agent", ["org:acme"])


@pytest.mark.django_db(transaction=True)
def test_evolve_rewrites_the_item_and_keeps_the_old_version(acme, fake_openai, llm_worker):
    created = acme.post("/api/knowledge", {"task": "Log in to site A", "content": f"Use password {SECRET} on the login page", "types": ["tool"]}, format="json").json()
    acme.put(f"/api/knowledge/{created['id']}", {"add_harmful_case": {"outcome": "failed", "reason": "captcha"}}, format="json")
    fake_openai.reply_json({"task": "Log in to site A despite the captcha", "content": "Solve the captcha first, then log in with the stored credential.", "summary_of_changes": "captcha step"})

    response = acme.put(f"/api/knowledge/{created['id']}", {"evolve_feedback": "mention the captcha"}, format="json")
    assert response.status_code == 200, response.json()
    job = response.json()["job"]
    assert job["status"] == "queued"
    done = wait_for(lambda: finished(acme, job["url"]), timeout=90, message="the evolve job")
    assert done["status"] == "succeeded" and done["attempts"] == 1

    item = Knowledge.objects.get(pk=created["id"])
    assert item.task == "Log in to site A despite the captcha"
    version = KnowledgeVersion.objects.get(knowledge=item)
    assert version.content == f"Use password {SECRET} on the login page"
    assert str(version.job_id) == job["id"] and version.changed_by == f"job:evolve:{job['id']}"
    assert "mention the captcha" in version.reason

    sent = fake_openai.requests[-1]["body"]
    prompt = " ".join(m["content"] for m in sent["messages"])
    assert "mention the captcha" in prompt and "captcha" in prompt and sent["response_format"]["type"] == "json_schema"
    wait_for(lambda: Knowledge.objects.get(pk=item.pk).embedding is not None, timeout=30, message="re-embedding")


@pytest.mark.django_db(transaction=True)
def test_an_edit_made_while_the_llm_writes_is_rewritten_not_overwritten(acme, fake_openai, llm_worker):
    created = acme.post("/api/knowledge", {"task": "Deploy the API", "content": "Run the deploy script.",
                                           "types": ["tool"]}, format="json").json()
    fake_openai.slow_json(3, {"task": "Deploy the API", "content": "Run the deploy script, then smoke-test it.",
                              "summary_of_changes": "smoke test"})  # written from the text before the edit
    fake_openai.reply_json({"task": "Deploy the API", "content": "Run deploy.sh from the release tag, then smoke-test it.",
                            "summary_of_changes": "smoke test"})
    job = acme.put(f"/api/knowledge/{created['id']}", {"evolve_feedback": "add a smoke test"}, format="json").json()["job"]
    wait_for(lambda: fake_openai.requests, timeout=60, message="the worker to ask the LLM")
    edited = acme.patch(f"/api/knowledge/{created['id']}", {"content": "Run deploy.sh from the release tag.",
                                                             "reason": "the script moved"}, format="json")
    assert edited.status_code == 200

    done = wait_for(lambda: finished(acme, job["url"]), timeout=90, message="the evolve job")
    assert done["status"] == "succeeded"
    assert Knowledge.objects.get(pk=created["id"]).content == "Run deploy.sh from the release tag, then smoke-test it."
    assert len(fake_openai.requests) == 2 and "release tag" in str(fake_openai.requests[1]["body"]["messages"])
    contents = list(KnowledgeVersion.objects.filter(knowledge_id=created["id"]).order_by("number")
                    .values_list("content", flat=True))
    assert contents == ["Run the deploy script.", "Run deploy.sh from the release tag."]  # the edit kept, nothing lost


@pytest.mark.django_db(transaction=True)
def test_secrets_of_linked_resources_and_their_earlier_versions_never_reach_the_llm(acme, fake_openai, llm_worker):
    old_secret = "hunter2-rotated-away-last-week"
    for secret in (old_secret, SECRET):  # the second save keeps the first secret in an earlier version
        acme.post("/api/resource", {"id": "credentials/site_a", "title": "site A", "secure_body": secret,
                                    "content_type": "credential"}, format="json")
    created = acme.post("/api/knowledge", {"task": "Log in to site A", "types": ["tool"],
                                           "content": f"the password is {SECRET} (it was {old_secret})",
                                           "resource_ids": ["credentials/site_a"]}, format="json").json()
    fake_openai.reply_json({"task": "t", "content": "c", "summary_of_changes": "s"})
    job = acme.put(f"/api/knowledge/{created['id']}", {"evolve_feedback": "shorter"}, format="json").json()["job"]
    assert wait_for(lambda: finished(acme, job["url"]), timeout=90, message="the evolve job")["status"] == "succeeded"
    sent = str(fake_openai.requests[-1]["body"])
    assert SECRET not in sent and old_secret not in sent and sent.count("[REDACTED]") >= 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("misbehave", ["junk", "http_500"])
def test_a_misbehaving_llm_fails_the_job_readably_after_retries_and_leaves_the_item_alone(acme, fake_openai, llm_worker, misbehave):
    created = acme.post("/api/knowledge", {"task": "keep me", "content": "unchanged", "types": ["tool"]}, format="json").json()
    for _ in range(6):
        fake_openai.reply_text("sure! here is a better version") if misbehave == "junk" else fake_openai.fail(500)
    job = acme.put(f"/api/knowledge/{created['id']}", {"evolve_feedback": "improve"}, format="json").json()["job"]
    done = wait_for(lambda: finished(acme, job["url"]), timeout=120, message="the evolve job to fail")
    assert done["status"] == "failed" and done["attempts"] == 4
    assert "gave up after 4 attempts" in done["error"]
    assert ("schema" in done["error"]) if misbehave == "junk" else ("InternalServerError" in done["error"])
    item = Knowledge.objects.get(pk=created["id"])
    assert (item.task, item.content) == ("keep me", "unchanged") and not KnowledgeVersion.objects.exists()


@pytest.mark.django_db
def test_evolve_without_an_llm_is_409_saying_how_to_configure_one(acme, settings):
    settings.KNOWHUB_LLM_MODEL = ""
    created = acme.post("/api/knowledge", {"task": "t", "content": "c", "types": ["tool"]}, format="json").json()
    response = acme.put(f"/api/knowledge/{created['id']}", {"evolve_feedback": "improve", "add_helpful_case": {"outcome": "ok"}}, format="json")
    assert response.status_code == 409
    assert "KNOWHUB_LLM_MODEL" in response.json()["error"]["message"]
    assert not Job.objects.exists() and Knowledge.objects.get(pk=created["id"]).helpful == 0  # all or nothing


@pytest.mark.django_db
def test_jobs_are_private_to_who_can_see_them(acme, fake_openai):
    created = acme.post("/api/knowledge", {"task": "t", "content": "c", "types": ["tool"]}, format="json").json()
    job = Job.objects.create(kind="evolve", subject=created["id"], requested_by="agent:research_agent")
    assert acme.get(f"/api/jobs/{job.id}").json()["status"] == "queued"
    assert client_for("spy", ["org:other"]).get(f"/api/jobs/{job.id}").status_code == 404
    assert acme.get("/api/jobs/not-a-uuid").status_code == 404


def llm_env(fake, **extra):
    return {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test-key", "KNOWHUB_LLM_MODEL": "fake-model",
            "KNOWHUB_RETRY_BACKOFF_SECONDS": "0", **extra}


@pytest.mark.django_db(transaction=True)
def test_an_llm_timeout_is_retried_then_fails_the_job(acme, fake_openai):
    from tests.conftest import CeleryWorker

    worker = CeleryWorker(name="impatient", extra_env=llm_env(fake_openai, KNOWHUB_LLM_TIMEOUT_SECONDS="1")).start()
    try:
        created = acme.post("/api/knowledge", {"task": "keep me", "content": "unchanged", "types": ["tool"]}, format="json").json()
        for _ in range(4):
            fake_openai.stall(3)
        job = acme.put(f"/api/knowledge/{created['id']}", {"evolve_feedback": "improve"}, format="json").json()["job"]
        done = wait_for(lambda: finished(acme, job["url"]), timeout=120, message="the job to time out")
        assert done["status"] == "failed" and "Timeout" in done["error"] and done["attempts"] == 4
        assert Knowledge.objects.get(pk=created["id"]).content == "unchanged"
    finally:
        worker.stop()


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_job_loses_nothing_and_the_job_runs_once(acme, fake_openai):
    import os
    import signal

    from tests.conftest import CeleryWorker

    fast = {"KNOWHUB_WORKER_HEARTBEAT_SECONDS": "1", "KNOWHUB_WORKER_STALE_SECONDS": "3"}
    doomed = CeleryWorker(name="doomed", extra_env=llm_env(fake_openai, **fast)).start()
    created = acme.post("/api/knowledge", {"task": "old task", "content": "old content", "types": ["tool"]}, format="json").json()
    fake_openai.stall(30)  # the doomed worker's call hangs: it is mid-job when killed
    fake_openai.reply_json({"task": "new task", "content": "new content", "summary_of_changes": "s"})
    job = acme.put(f"/api/knowledge/{created['id']}", {"evolve_feedback": "improve"}, format="json").json()["job"]
    wait_for(lambda: fake_openai.requests, timeout=60, message="the doomed worker to call the LLM")
    assert Job.objects.get(pk=job["id"]).status == "running"
    os.killpg(doomed.proc.pid, signal.SIGKILL)
    doomed.proc.wait()

    rescuer = CeleryWorker(name="rescuer", extra_env=llm_env(fake_openai, **fast)).start()
    try:
        done = wait_for(lambda: finished(acme, job["url"]), timeout=120, message="the rescued job")
    finally:
        rescuer.stop()
    assert done["status"] == "succeeded" and done["attempts"] == 2
    assert KnowledgeVersion.objects.filter(knowledge_id=created["id"]).count() == 1
    assert Knowledge.objects.get(pk=created["id"]).content == "new content"


@pytest.mark.django_db(transaction=True)
def test_evolve_runs_through_a_redis_broker_too(acme, fake_openai):
    import redis

    from knowhub_site.celery import app
    from knowledge.tasks import run_evolve
    from tests.conftest import CeleryWorker

    broker = "redis://127.0.0.1:6379/14"
    redis.Redis.from_url(broker).flushdb()
    worker = CeleryWorker(name="redis-llm", broker_url=broker, extra_env=llm_env(fake_openai)).start()
    try:
        created = acme.post("/api/knowledge", {"task": "old", "content": "old", "types": ["tool"]}, format="json").json()
        fake_openai.reply_json({"task": "via redis", "content": "new", "summary_of_changes": "s"})
        job = Job.objects.create(kind="evolve", subject=created["id"], requested_by="agent:research_agent",
                                 params={"feedback": "improve", "model": "fake-model"})
        with app.connection_for_write(broker) as connection:
            run_evolve.apply_async(args=[str(job.id)], connection=connection)
        done = wait_for(lambda: finished(acme, f"/api/jobs/{job.id}"), timeout=90, message="the Redis-brokered job")
    finally:
        worker.stop()
    assert done["status"] == "succeeded"
    assert Knowledge.objects.get(pk=created["id"]).task == "via redis"
