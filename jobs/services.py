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


# Queued jobs nobody has claimed after this long lost their message (a broker
# restart, a worker killed between taking and starting it): send them again.
UNCLAIMED_AFTER_SECONDS = 120


def job_claim(*, job_id: str, worker: str) -> bool:
    """Mark a queued (or orphaned running) job as running on `worker`; False if it already finished."""
    from django.db.models import F

    from jobs.models import Job

    return bool(Job.objects.filter(pk=job_id, status__in=[Job.Status.QUEUED, Job.Status.RUNNING]).update(
        status=Job.Status.RUNNING, started_at=timezone.now(), attempts=F("attempts") + 1, worker=worker))


def jobs_requeue_orphans() -> list[str]:
    """Send again the jobs whose worker died (its heartbeat stopped) or whose message was lost.

    Each job is taken back with a conditional UPDATE, so when several workers
    run this at once only one of them re-sends it; the job's own claim guard
    makes a duplicate delivery harmless anyway.
    """
    from datetime import timedelta

    from jobs.models import Job, WorkerHeartbeat
    from jobs.selectors import workers_alive

    alive = {w.hostname for w in workers_alive()}
    requeued = []
    now = timezone.now()
    running = Job.objects.filter(status=Job.Status.RUNNING).exclude(worker="").exclude(worker__in=alive)
    for job_id, worker in running.values_list("id", "worker"):
        if Job.objects.filter(pk=job_id, status=Job.Status.RUNNING, worker=worker).update(
            status=Job.Status.QUEUED, worker="", sent_at=now
        ):
            requeued.append(job_id)
    stale = now - timedelta(seconds=UNCLAIMED_AFTER_SECONDS)
    for job_id in Job.objects.filter(status=Job.Status.QUEUED, sent_at__lt=stale).values_list("id", flat=True):
        if Job.objects.filter(pk=job_id, status=Job.Status.QUEUED, sent_at__lt=stale).update(sent_at=now):
            requeued.append(job_id)
    for job_id in requeued:
        _send(Job.objects.get(pk=job_id))
    WorkerHeartbeat.objects.exclude(hostname__in=alive).filter(last_seen__lt=timezone.now() - timedelta(hours=1)).delete()
    return [str(j) for j in requeued]


def _send(job) -> None:
    from knowledge.tasks import run_evolve, run_slim

    {"evolve": run_evolve, "slim": run_slim}[job.kind].delay(str(job.id))
