"""Orphaned jobs are sent again exactly once per orphaning."""
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job, WorkerHeartbeat
from jobs.services import jobs_requeue_orphans
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    calls = []
    monkeypatch.setattr("jobs.services._send", lambda job: calls.append(str(job.id)))
    return calls


def test_a_running_job_of_a_dead_worker_is_requeued_once(sent):
    now = timezone.now()
    WorkerHeartbeat.objects.create(hostname="alive@h", pid=1, started_at=now, last_seen=now)
    item = make_knowledge(embed=False)
    orphan = Job.objects.create(kind="evolve", knowledge=item, requested_by="x", status="running", worker="dead@h")
    healthy = Job.objects.create(kind="evolve", knowledge=item, requested_by="x", status="running", worker="alive@h")
    assert jobs_requeue_orphans() == [str(orphan.id)]
    assert jobs_requeue_orphans() == []  # queued again, not sent twice
    orphan.refresh_from_db()
    assert (orphan.status, orphan.worker) == ("queued", "")
    assert Job.objects.get(pk=healthy.pk).status == "running" and sent == [str(orphan.id)]


def test_a_queued_job_nobody_claims_is_resent_after_a_while_not_every_beat(sent):
    item = make_knowledge(embed=False)
    fresh = Job.objects.create(kind="slim", requested_by="x")
    lost = Job.objects.create(kind="evolve", knowledge=item, requested_by="x", sent_at=timezone.now() - timedelta(minutes=5))
    assert jobs_requeue_orphans() == [str(lost.id)]
    assert jobs_requeue_orphans() == []
    assert str(fresh.id) not in sent
