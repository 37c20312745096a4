"""Writes for worker bookkeeping."""
from django.utils import timezone

from jobs.models import WorkerHeartbeat


def worker_heartbeat_record(*, hostname: str, pid: int) -> None:
    now = timezone.now()
    WorkerHeartbeat.objects.update_or_create(
        hostname=hostname,
        defaults={"pid": pid, "last_seen": now},
        create_defaults={"pid": pid, "last_seen": now, "started_at": now},
    )


def worker_heartbeat_clear(*, hostname: str) -> None:
    WorkerHeartbeat.objects.filter(hostname=hostname).delete()
