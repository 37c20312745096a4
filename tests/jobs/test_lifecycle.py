"""The job lifecycle (jobs.services): every move is guarded, a finished job never changes, a stale claim writes nothing."""
import pytest
from django.db import transaction

from agents.caller import Caller
from jobs.models import Job
from jobs.services import job_claim, job_create, job_fail, job_progress, job_succeed
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


def job(requested_by="agent:a", **fields) -> Job:
    return Job.objects.create(kind="slim", requested_by=requested_by, **fields)


def status_of(j: Job) -> str:
    return Job.objects.values_list("status", flat=True).get(pk=j.pk)


def test_a_claimed_job_runs_under_a_numbered_attempt_and_succeeds_once():
    j = job()
    assert job_claim(job_id=j.id, worker="w/1/a") == 1
    assert job_progress(job_id=j.id, progress={"done": 1}, attempt=1)
    assert job_succeed(job_id=j.id, result={"groups": []}, attempt=1)
    j.refresh_from_db()
    assert (j.status, j.progress, j.result, j.worker) == ("succeeded", {"done": 1}, {"groups": []}, "w/1/a")
    assert j.finished_at is not None


def test_a_finished_job_is_never_claimed_failed_or_advanced_again():
    j = job()
    job_claim(job_id=j.id, worker="w/1/a")
    job_succeed(job_id=j.id, result={"ok": True})
    assert job_claim(job_id=j.id, worker="w/2/b") == 0
    assert not job_fail(job_id=j.id, error="late failure")
    assert not job_progress(job_id=j.id, progress={"done": 9})
    assert not job_succeed(job_id=j.id, result={"ok": False})
    j.refresh_from_db()
    assert (j.status, j.result, j.error, j.progress) == ("succeeded", {"ok": True}, "", {})


def test_a_queued_job_cannot_succeed_without_being_claimed():
    j = job()
    assert not job_succeed(job_id=j.id, result={})
    assert not job_progress(job_id=j.id, progress={"done": 1})
    assert status_of(j) == "queued"


def test_a_queued_or_running_job_can_fail_and_keeps_a_bounded_reason():
    queued, running = job(), job()
    job_claim(job_id=running.id, worker="w/1/a")
    assert job_fail(job_id=queued.id, error="broker gone")
    assert job_fail(job_id=running.id, error="x" * 5000)
    assert status_of(queued) == status_of(running) == "failed"
    assert len(Job.objects.get(pk=running.pk).error) == 2000


def test_a_stale_claim_writes_nothing_once_the_job_was_claimed_again():
    j = job()
    first = job_claim(job_id=j.id, worker="dead/1/a")
    second = job_claim(job_id=j.id, worker="live/2/b")  # re-sent after the first worker was thought dead
    assert (first, second) == (1, 2)
    assert not job_progress(job_id=j.id, progress={"from": "first"}, attempt=first)
    assert not job_succeed(job_id=j.id, result={"from": "first"}, attempt=first)
    assert not job_fail(job_id=j.id, error="first gave up", attempt=first)
    assert job_succeed(job_id=j.id, result={"from": "second"}, attempt=second)
    assert Job.objects.get(pk=j.pk).result == {"from": "second"}


def test_creating_a_job_of_an_unknown_kind_fails_before_anything_is_stored():
    with pytest.raises(LookupError, match="no task is registered for job kind 'nonesuch'"):
        job_create(kind="nonesuch", requested_by="agent:a")
    assert not Job.objects.filter(kind="nonesuch").exists()


def test_a_job_created_in_a_transaction_that_rolls_back_leaves_no_row():
    with pytest.raises(RuntimeError), transaction.atomic():
        created = job_create(kind="slim", requested_by="agent:a", params={"dry_run": True})
        raise RuntimeError("the request failed after queueing")
    assert not Job.objects.filter(pk=created.pk).exists()


def agent(readable, principal="agent:other") -> Caller:
    return Caller(principal=principal, agent_id=principal.split(":")[1], readable_scopes=readable, writable_scopes=readable)


def test_a_job_about_an_item_is_visible_to_the_items_readers_only_and_one_about_none_to_its_requester_reading_its_scopes():
    item = make_knowledge(embed=False, scopes=["team:a"])
    about = Job.objects.create(kind="evolve", subject=item.id, requested_by="agent:asker")
    # a slim job is about no item: its requester sees it while it may read every scope the job works over
    slim = job(requested_by="agent:asker", params={"writable_scopes": ["team:a"]})
    everywhere = job(requested_by="agent:asker", params={"writable_scopes": None})

    def visible(caller):
        return set(Job.objects.visible_to(caller).values_list("pk", flat=True))

    assert visible(agent(("team:a",))) == {about.pk}
    assert visible(agent(("team:b",))) == set()
    # another token of the asking agent, with other scopes: asking is not enough
    assert visible(agent(("team:b",), principal="agent:asker")) == set()
    assert visible(agent(("team:a",), principal="agent:asker")) == {about.pk, slim.pk}
    assert visible(agent(("team:a", "team:b"), principal="agent:asker")) == {about.pk, slim.pk}
    assert visible(agent(None)) >= {about.pk, slim.pk, everywhere.pk}
