"""The job lifecycle and worker bookkeeping.

A job is created queued and sent to the broker on commit (`job_create`), claimed by a worker
(`job_claim`), reports progress while it runs (`job_progress`; `ProgressWriter` at most every few seconds) and ends succeeded or failed
(`job_succeed`, `job_fail`); the heartbeat sweep takes back the jobs of dead workers
(`jobs_requeue_orphans`). Every state change is one conditional UPDATE allowed by `Job.MOVES_TO`,
so two workers, or a worker and the sweep, never both move the same job, and a finished job
never changes again. A claim numbers its attempt; passing that number to `job_progress`,
`job_succeed` or `job_fail` makes the write land only while the claim is still the job's latest.
"""
import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from core import events
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


def _move(job_id, to: str, *, attempt: int | None = None, where: Q | None = None, **fields) -> bool:
    """Move the job to state `to` if it is in a state allowed to move there (and, given `attempt`, its latest claim
    is that attempt; given `where`, it matches that too); True when it moved."""
    jobs = Job.objects.filter(pk=job_id, status__in=Job.MOVES_TO[to])
    if where is not None:
        jobs = jobs.filter(where)
    if attempt is not None:
        jobs = jobs.filter(attempts=attempt)
    return bool(jobs.update(status=to, **fields))


def job_create(*, kind: str, requested_by: str, subject: str | None = None, params: dict | None = None,
               progress: dict | None = None) -> Job:
    """A queued job, sent to the broker once the surrounding transaction commits (never for a rolled-back one)."""
    task_for(kind)  # an unknown kind fails here, on the request, not later in a worker
    job = Job.objects.create(kind=kind, requested_by=requested_by, subject=subject, params=params or {},
                             progress=progress or {})
    transaction.on_commit(lambda: job_send(job))
    return job


def job_progress(*, job_id, progress: dict, attempt: int | None = None) -> bool:
    """Record how far a running job got; False (nothing written) once it finished or was claimed again."""
    jobs = Job.objects.filter(pk=job_id, status=Job.Status.RUNNING)
    if attempt is not None:
        jobs = jobs.filter(attempts=attempt)
    return bool(jobs.update(progress=progress))


class ProgressWriter:
    """A running job's progress, written (one UPDATE) at most every `every` seconds, for work that reports after
    each small step (a record imported, a pair checked): `write(progress)` skips a write sooner than that unless
    `last`, and says False once the job finished or was claimed again (nothing written; the caller may stop)."""

    def __init__(self, *, job_id, attempt: int, every: float):
        self.job_id, self.attempt, self.every, self.written = job_id, attempt, every, float("-inf")

    def write(self, progress: dict, *, last: bool = False) -> bool:
        now = time.monotonic()
        if not last and now - self.written < self.every:
            return True
        self.written = now
        return job_progress(job_id=self.job_id, attempt=self.attempt, progress=progress)


def job_succeed(*, job_id, result, attempt: int | None = None) -> bool:
    """A running job finished with `result`; False when it was not running (or not under this attempt)."""
    moved = _move(job_id, Job.Status.SUCCEEDED, attempt=attempt, result=result, finished_at=timezone.now())
    if moved:
        _announce_finished(job_id)
    return moved


def job_fail(*, job_id, error: str, attempt: int | None = None) -> bool:
    """A queued or running job failed with `error` (kept to 2,000 characters); False when it had finished already."""
    moved = _move(job_id, Job.Status.FAILED, attempt=attempt, error=error[:2000], finished_at=timezone.now())
    if moved:
        _announce_finished(job_id)
    return moved


def _announce_finished(job_id) -> None:
    """job.finished, without scopes: who may see it is who may read the job (`Job.objects.visible_to`)."""
    job = Job.objects.filter(pk=job_id).values("id", "kind", "status", "subject", "requested_by", "error").get()
    events.emit(events.JOB_FINISHED, scopes=None, data={
        "job_id": str(job["id"]), "kind": job["kind"], "status": job["status"], "subject": job["subject"],
        "requested_by": job["requested_by"], "error": job["error"][:300]})


def job_annotate(*, job_id, **result) -> bool:
    """Add keys to a succeeded job's result (e.g. the review of a proposal it made); False unless it succeeded."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id, status=Job.Status.SUCCEEDED).first()
        if job is None:
            return False
        job.result = {**(job.result or {}), **result}
        job.save(update_fields=["result"])
    return True


def job_holds_claim(job_id, attempt: int) -> bool:
    """Within a transaction: lock the job's row until it ends, and say whether `attempt` is still the running job's
    latest claim (if not, a copy re-sent while this one ran has claimed it since, and only that copy writes)."""
    return Job.objects.select_for_update().filter(pk=job_id, attempts=attempt, status=Job.Status.RUNNING).exists()


def job_claim(*, job_id: str, worker: str, task_id: str = "") -> int:
    """Mark a queued job as running on `worker` under the broker message `task_id`.

    Returns the claim's attempt number, 0 when the job is not this message's
    to run: it finished, or another message claimed it and that claim's worker
    instance is alive. A running job is claimed again by the message that
    claimed it (a retry, a redelivery after its worker was lost) or, once the
    claiming instance has no fresh heartbeat, by any message: the copy the
    sweep re-sent for a job whose first message waited too long in the queue
    must not run the job a second time beside the first (callers outside
    Celery pass no task id and are one message). A run may finish the job
    only while its attempt is still the job's latest (see evolve_run).
    """
    from jobs.selectors import alive_instances

    # running already (Job.MOVES_TO allows it): only for its own message, or once its worker is gone
    reclaimable = ~Q(status=Job.Status.RUNNING) | Q(task_id=task_id) | ~Q(worker__in=alive_instances())
    if not _move(job_id, Job.Status.RUNNING, where=reclaimable, started_at=timezone.now(),
                 attempts=F("attempts") + 1, worker=worker, task_id=task_id):
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
        if Job.objects.filter(pk=job_id, worker=worker, status__in=Job.MOVES_TO[Job.Status.QUEUED]).update(
            status=Job.Status.QUEUED, worker="", task_id="", sent_at=now
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
