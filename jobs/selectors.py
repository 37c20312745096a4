"""Reads for worker bookkeeping."""
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from jobs.models import Job, WorkerHeartbeat


def jobs_about(*, subject: str, kind: str, limit: int = 5) -> list[Job]:
    """The latest jobs of `kind` about `subject` (an item's evolve jobs), newest first."""
    return list(Job.objects.filter(kind=kind, subject=subject)[:limit])


def _fresh_heartbeats():
    cutoff = timezone.now() - timedelta(seconds=settings.KNOWHUB_WORKER_STALE_SECONDS)
    return WorkerHeartbeat.objects.filter(last_seen__gte=cutoff)


def alive_instances():
    """The worker instances with a fresh heartbeat, as a subquery of their names."""
    return _fresh_heartbeats().values("instance")


def workers_alive() -> list[WorkerHeartbeat]:
    return list(_fresh_heartbeats())
