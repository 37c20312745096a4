"""Orphaned jobs are sent again exactly once per orphaning; orphaned means the claiming worker *instance* died."""
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job, WorkerHeartbeat
from jobs.services import job_claim, jobs_requeue_orphans, worker_heartbeat_record, worker_heartbeats_clear_dead
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db

DEAD = "knowhub-8000@box/4242/0badcafe"
ALIVE = "knowhub-8000@box/4343/5eed5eed"  # the same hostname, restarted: a new pid and boot id


@pytest.fixture
def sent(monkeypatch):
    calls = []
    monkeypatch.setattr("jobs.services.job_send", lambda job: calls.append(str(job.id)))
    return calls


def running_job(worker: str, *, started_seconds_ago: float = 600) -> Job:
    return Job.objects.create(kind="evolve", subject=make_knowledge(embed=False).id, requested_by="x", status="running",
                              worker=worker, started_at=timezone.now() - timedelta(seconds=started_seconds_ago))


def test_a_running_job_of_a_dead_worker_is_requeued_once(sent):
    worker_heartbeat_record(instance="alive@h/1/aa", hostname="alive@h", pid=1)
    orphan = running_job("dead@h/2/bb")
    healthy = running_job("alive@h/1/aa")
    assert jobs_requeue_orphans() == [str(orphan.id)]
    assert jobs_requeue_orphans() == []  # queued again, not sent twice
    orphan.refresh_from_db()
    assert (orphan.status, orphan.worker) == ("queued", "")
    assert Job.objects.get(pk=healthy.pk).status == "running" and sent == [str(orphan.id)]


def test_a_job_of_a_dead_instance_is_requeued_although_a_new_instance_with_its_hostname_is_alive(sent):
    long_ago = timezone.now() - timedelta(minutes=5)
    WorkerHeartbeat.objects.create(instance=DEAD, hostname="knowhub-8000@box", pid=4242, started_at=long_ago, last_seen=long_ago)
    worker_heartbeat_record(instance=ALIVE, hostname="knowhub-8000@box", pid=4343)
    orphan = running_job(DEAD)
    mine = running_job(ALIVE)
    assert jobs_requeue_orphans() == [str(orphan.id)]
    assert Job.objects.get(pk=mine.pk).status == "running"


def test_a_job_claimed_moments_ago_is_left_alone_until_its_instance_could_have_beaten(sent, settings):
    settings.KNOWHUB_WORKER_STALE_SECONDS = 30
    just_claimed = running_job("new@h/9/cc", started_seconds_ago=2)
    assert jobs_requeue_orphans() == []
    Job.objects.filter(pk=just_claimed.pk).update(started_at=timezone.now() - timedelta(seconds=31))
    assert jobs_requeue_orphans() == [str(just_claimed.id)]


def test_a_supervisor_that_saw_a_worker_die_makes_its_jobs_orphans_at_once(sent):
    worker_heartbeat_record(instance=DEAD, hostname="knowhub-8000@box", pid=4242)
    worker_heartbeat_record(instance="knowhub-9000@box/4242/77", hostname="knowhub-9000@box", pid=4242)
    orphan = running_job(DEAD)
    assert jobs_requeue_orphans() == []  # its heartbeat is still fresh
    assert worker_heartbeats_clear_dead(hostname_prefix="knowhub-8000@", pid=4242) == 1
    assert jobs_requeue_orphans() == [str(orphan.id)]
    assert WorkerHeartbeat.objects.filter(instance="knowhub-9000@box/4242/77").exists()  # another stack's worker


def test_a_claim_is_numbered_and_a_finished_job_cannot_be_claimed():
    job = Job.objects.create(kind="evolve", subject=make_knowledge(embed=False).id, requested_by="x")
    assert job_claim(job_id=job.id, worker=DEAD) == 1
    assert job_claim(job_id=job.id, worker=ALIVE) == 2
    Job.objects.filter(pk=job.pk).update(status="succeeded")
    assert job_claim(job_id=job.id, worker=ALIVE) == 0


def test_a_copy_resent_while_the_first_message_runs_on_a_live_worker_does_not_claim_the_job():
    """The sweep re-sends a job whose message waited past the resend window; the first message may still be taken
    then: of the two copies only one runs, while its worker is alive."""
    worker_heartbeat_record(instance=ALIVE, hostname="knowhub-8000@box", pid=4343)
    job = Job.objects.create(kind="slim", requested_by="x")
    assert job_claim(job_id=job.id, worker=ALIVE, task_id="first-message") == 1
    assert job_claim(job_id=job.id, worker="knowhub-8000@box/4343/other", task_id="resent-copy") == 0
    assert Job.objects.values_list("attempts", "task_id").get(pk=job.pk) == (1, "first-message")


def test_a_message_claims_its_running_job_again_on_retry_and_any_copy_does_once_its_worker_died():
    worker_heartbeat_record(instance=ALIVE, hostname="knowhub-8000@box", pid=4343)
    retried, orphaned = Job.objects.create(kind="slim", requested_by="x"), Job.objects.create(kind="slim", requested_by="x")
    assert job_claim(job_id=retried.id, worker=ALIVE, task_id="t1") == 1
    assert job_claim(job_id=retried.id, worker=ALIVE, task_id="t1") == 2  # the task's own retry (same task id)
    assert job_claim(job_id=orphaned.id, worker=DEAD, task_id="t2") == 1
    assert job_claim(job_id=orphaned.id, worker=ALIVE, task_id="t3") == 2  # its instance has no fresh heartbeat
    assert Job.objects.values_list("worker", "task_id").get(pk=orphaned.pk) == (ALIVE, "t3")


def test_a_job_taken_back_from_a_dead_worker_forgets_the_message_that_claimed_it(sent):
    job = running_job(DEAD)
    Job.objects.filter(pk=job.pk).update(task_id="lost-with-its-worker")
    assert jobs_requeue_orphans() == [str(job.id)]
    assert Job.objects.values_list("status", "worker", "task_id").get(pk=job.pk) == ("queued", "", "")


def test_an_evolve_whose_copy_arrives_while_it_runs_asks_the_llm_once(monkeypatch):
    from knowledge.evolve import evolve_run

    worker_heartbeat_record(instance=ALIVE, hostname="knowhub-8000@box", pid=4343)
    item = make_knowledge(embed=False)
    job = Job.objects.create(kind="evolve", subject=item.id, requested_by="x", params={"feedback": "f", "model": "m"})
    asked = []

    def llm_while_the_copy_arrives(**kwargs):
        asked.append(kwargs["user"])
        copy = evolve_run(job_id=str(job.id), worker="knowhub-8000@box/4343/other", task_id="resent-copy")
        assert copy.status == "running" and copy.task_id == "first-message"
        return {"task": "rewritten task", "content": "rewritten content", "summary_of_changes": "s"}

    monkeypatch.setattr("knowledge.llm.chat_json", llm_while_the_copy_arrives)
    done = evolve_run(job_id=str(job.id), worker=ALIVE, task_id="first-message")
    assert (done.status, done.attempts, len(asked)) == ("succeeded", 1, 1)
    item.refresh_from_db()
    assert item.content == "rewritten content"


def test_a_queued_job_nobody_claims_is_resent_after_a_while_not_every_beat(sent):
    item = make_knowledge(embed=False)
    fresh = Job.objects.create(kind="slim", requested_by="x")
    lost = Job.objects.create(kind="evolve", subject=item.id, requested_by="x", sent_at=timezone.now() - timedelta(minutes=5))
    assert jobs_requeue_orphans() == [str(lost.id)]
    assert jobs_requeue_orphans() == []
    assert str(fresh.id) not in sent


def test_an_evolve_whose_job_was_claimed_again_meanwhile_writes_nothing(monkeypatch):
    """The dead instance's copy may still be running (no PDEATHSIG, a partition): only the latest claim writes."""
    from knowledge.evolve import evolve_run
    from knowledge.models import KnowledgeVersion

    item = make_knowledge(embed=False)
    job = Job.objects.create(kind="evolve", subject=item.id, requested_by="x", params={"feedback": "f", "model": "m"})

    def llm_while_the_job_is_resent(**kwargs):
        job_claim(job_id=job.id, worker=ALIVE)  # re-sent and claimed by the new instance
        return {"task": "stale", "content": "stale", "summary_of_changes": "s"}

    monkeypatch.setattr("knowledge.llm.chat_json", llm_while_the_job_is_resent)
    stale = evolve_run(job_id=str(job.id), worker=DEAD)
    assert (stale.status, stale.worker, stale.attempts) == ("running", ALIVE, 2)
    item.refresh_from_db()
    assert item.content != "stale" and not KnowledgeVersion.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_job_whose_message_the_broker_refused_is_stored_queued_and_the_reply_does_not_fail(monkeypatch, settings):
    from jobs.services import job_send

    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr("knowledge.tasks.run_slim.delay", broker_down)
    job = Job.objects.create(kind="slim", requested_by="agent:a")
    assert job_send(job) is False
    assert Job.objects.get(pk=job.pk).status == Job.Status.QUEUED  # the sweep re-sends it later
