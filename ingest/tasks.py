"""Celery tasks of the ingest app: take the job id, call one service."""
from celery import shared_task


# A document's reading is bounded in time as well as in size: past the soft limit the job fails with the reason.
SOFT_TIME_LIMIT_SECONDS = 15 * 60


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, soft_time_limit=SOFT_TIME_LIMIT_SECONDS,
             time_limit=SOFT_TIME_LIMIT_SECONDS + 60)
def run_ingest(self, job_id: str) -> None:
    from ingest.documents import document_run
    from jobs.instance import task_claimant

    try:
        document_run(job_id=job_id, **task_claimant(self))
    except Exception as exc:  # noqa: BLE001 - a crashed job must say why, not stay "running"
        from ingest.models import Document
        from jobs.services import job_fail

        reason = f"{type(exc).__name__}: {exc}"
        job_fail(job_id=job_id, error=reason)
        Document.objects.filter(job=job_id, status__in=["queued", "processing"]).update(status="failed", error=reason[:2000])
        raise


# An import is bounded too, generously: in-process a CSV row took ~20 ms (5,000 rows in 104 s) and an export's
# item ~3.6 ms (5,000 in 18 s), so a 50 MB CSV of short rows runs for hours. Past the soft limit the job fails with
# the reason; what it stored stays, and importing the file again skips it.
IMPORT_SOFT_TIME_LIMIT_SECONDS = 4 * 60 * 60


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, soft_time_limit=IMPORT_SOFT_TIME_LIMIT_SECONDS,
             time_limit=IMPORT_SOFT_TIME_LIMIT_SECONDS + 60)
def run_import(self, job_id: str) -> None:
    from ingest.imports import import_end, import_run
    from jobs.instance import task_claimant

    try:
        import_run(job_id=job_id, **task_claimant(self))
    except Exception as exc:  # noqa: BLE001 - a crashed job must say why, and its upload must not stay
        import_end(job_id=job_id, error=f"{type(exc).__name__}: {exc}")
        raise
