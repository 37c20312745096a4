"""Celery tasks of the ingest app: take the job id, call one service."""
from celery import shared_task


# A document's reading is bounded in time as well as in size: past the soft limit the job fails with the reason.
SOFT_TIME_LIMIT_SECONDS = 15 * 60


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, soft_time_limit=SOFT_TIME_LIMIT_SECONDS,
             time_limit=SOFT_TIME_LIMIT_SECONDS + 60)
def run_ingest(self, job_id: str) -> None:
    from ingest.documents import document_run
    from jobs.instance import running_task_worker

    try:
        document_run(job_id=job_id, worker=running_task_worker(self))
    except Exception as exc:  # noqa: BLE001 - a crashed job must say why, not stay "running"
        from ingest.models import Document
        from jobs.services import job_fail

        reason = f"{type(exc).__name__}: {exc}"
        job_fail(job_id=job_id, error=reason)
        Document.objects.filter(job=job_id, status__in=["queued", "processing"]).update(status="failed", error=reason[:2000])
        raise
