"""Writes for worker bookkeeping: heartbeats, job claims, re-sending orphaned jobs."""
import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from jobs.kinds import task_for
from jobs.models import Job, WorkerHeartbeat

logger = logging.getLogger(__name__)

FORGET_HEARTBEATS_AFTER = timedelta(hours=1)


def worker_heartbeat_record(*, instance: str, hostname: str, pid: int) -> None:
    now = timezone.now()
    WorkerHeartbeat.objects.update_or_create(
        instance=instance,
        defaults={"last_seen": now},
        create_defaults={"hostname": hostname, "pid": pid, "last_seen": now, "started_at": now},
    )


def worker_heartbeat_clear(*, instance: str) -> None:
    WorkerHeartbeat.objects.filter(instance=instance).delete()


def worker_heartbeats_clear_dead(*, hostname_prefix: str, pid: int) -> int:
    """Forget the instances of a worker main process known to be dead (its supervisor saw it exit).

    Its jobs are then re-sent at the next beat of any live worker instead of
    after KNOWHUB_WORKER_STALE_SECONDS.
    """
    deleted, _ = WorkerHeartbeat.objects.filter(hostname__startswith=hostname_prefix, pid=pid).delete()
    return deleted


def job_claim(*, job_id: str, worker: str) -> int:
    """Mark a queued (or orphaned running) job as running on `worker`.

    Returns the claim's attempt number, 0 when the job already finished. A
    run may finish the job only while its attempt is still the job's latest
    (see evolve_run): a copy that was re-sent while another still ran cannot
    both write.
    """
    claimed = Job.objects.filter(pk=job_id, status__in=[Job.Status.QUEUED, Job.Status.RUNNING]).update(
        status=Job.Status.RUNNING, started_at=timezone.now(), attempts=F("attempts") + 1, worker=worker)
    if not claimed:
        return 0
    return Job.objects.filter(pk=job_id).values_list("attempts", flat=True).get()


def jobs_requeue_orphans() -> list[str]:
    """Send again the jobs whose worker instance died (no fresh heartbeat) or whose message was lost.

    A job is orphaned when the instance that claimed it has no fresh
    heartbeat, even if a new instance with the same hostname is alive. A job
    claimed less than the stale window ago is left alone: its instance may not
    have written its first beat yet. Each job is taken back with a conditional
    UPDATE, so when several workers run this at once only one re-sends it; the
    job's claim makes a duplicate delivery harmless anyway.
    """
    from jobs.selectors import workers_alive

    alive = {w.instance for w in workers_alive()}
    requeued = []
    now = timezone.now()
    grace = now - timedelta(seconds=settings.KNOWHUB_WORKER_STALE_SECONDS)
    running = (Job.objects.filter(status=Job.Status.RUNNING)
               .filter(Q(started_at__isnull=True) | Q(started_at__lt=grace))
               .exclude(worker="").exclude(worker__in=alive))
    for job_id, worker in running.values_list("id", "worker"):
        if Job.objects.filter(pk=job_id, status=Job.Status.RUNNING, worker=worker).update(
            status=Job.Status.QUEUED, worker="", sent_at=now
        ):
            requeued.append(job_id)
    # queued jobs nobody claimed for this long lost their message (the broker was down or
    # restarted, a worker died between taking and starting it): send them again
    stale = now - timedelta(seconds=settings.KNOWHUB_JOB_RESEND_SECONDS)
    for job_id in Job.objects.filter(status=Job.Status.QUEUED, sent_at__lt=stale).values_list("id", flat=True):
        if Job.objects.filter(pk=job_id, status=Job.Status.QUEUED, sent_at__lt=stale).update(sent_at=now):
            requeued.append(job_id)
    for job_id in requeued:
        job_send(Job.objects.get(pk=job_id))
    WorkerHeartbeat.objects.exclude(instance__in=alive).filter(last_seen__lt=now - FORGET_HEARTBEATS_AFTER).delete()
    return [str(j) for j in requeued]


def job_send(job) -> bool:
    """Give the job's message to the broker (call on commit); False when the broker refused it.

    The caller's reply never fails for it: the job stays queued, and the
    workers' heartbeat sweep sends it again KNOWHUB_JOB_RESEND_SECONDS after
    `sent_at`, once the broker is back.
    """
    try:
        task_for(job.kind).delay(str(job.id))
        return True
    except Exception as exc:  # noqa: BLE001 - a broker outage must not turn a stored job into an error reply
        logger.warning("could not send %s job %s (%s); it will be re-sent", job.kind, job.id, exc)
        return False
