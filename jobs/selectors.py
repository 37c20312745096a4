"""Reads for worker bookkeeping."""
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from jobs.models import WorkerHeartbeat


def workers_alive() -> list[WorkerHeartbeat]:
    cutoff = timezone.now() - timedelta(seconds=settings.KNOWHUB_WORKER_STALE_SECONDS)
    return list(WorkerHeartbeat.objects.filter(last_seen__gte=cutoff))
