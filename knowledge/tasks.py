"""Celery tasks: take ids, re-fetch, call one service."""
from celery import shared_task

from jobs.instance import task_claimant
from knowledge.search.embeddings import EmbedderError


@shared_task(bind=True, autoretry_for=(EmbedderError,), retry_backoff=10, retry_backoff_max=600, max_retries=8)
def embed_knowledge(self, knowledge_id: str | list[str]) -> None:
    """Embed a batch of items (a list of ids; a single id, as messages queued before batches carried)."""
    from knowledge.search.embeddings import get_embedder
    from knowledge.search.indexing import embed_items, stale_items

    ids = [knowledge_id] if isinstance(knowledge_id, str) else list(knowledge_id)
    embedder = get_embedder()
    # only those still without a current vector: the beat's sweep may have embedded them while this message waited
    # behind a backlog (each would otherwise be embedded, and checked for conflicts, twice)
    items = list(stale_items(embedder.name).filter(pk__in=ids).only("id", "task", "content").order_by())
    if items and embed_items(items=items, embedder=embedder):
        detect_later([item.id for item in items])  # the sweep asked for the others' checks itself


def detect_later(ids: list[str]) -> None:
    """Look for the items' conflicts in another task (it may wait for an LLM; embedding never does)."""
    from django.conf import settings

    if settings.KNOWHUB_CONFLICT_DETECTION:
        detect_conflicts.delay(ids)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def detect_conflicts(self, knowledge_ids: list[str]) -> None:
    """Contradiction and overlap detection for newly embedded items (knowledge.conflicts)."""
    from knowledge.conflicts import detect_for

    detect_for(knowledge_ids=knowledge_ids)


EVOLVE_MAX_RETRIES = 3


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=EVOLVE_MAX_RETRIES)
def run_evolve(self, job_id: str) -> None:
    from knowledge import evolve, llm

    try:
        evolve.evolve_run(job_id=job_id, **task_claimant(self))
    except llm.LLMError as exc:
        if self.request.retries >= self.max_retries:
            evolve.evolve_fail(job_id=job_id, error=f"gave up after {self.request.retries + 1} attempts: {exc}")
            return
        raise self.retry(exc=exc, countdown=2 ** self.request.retries * _backoff_base())
    except Exception as exc:  # noqa: BLE001 - a crashed job must say why, not stay "running" (as run_slim's)
        evolve.evolve_fail(job_id=job_id, error=f"{type(exc).__name__}: {exc}")
        raise


def _backoff_base() -> float:
    from django.conf import settings

    return float(getattr(settings, "KNOWHUB_RETRY_BACKOFF_SECONDS", 5))


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True)
def run_slim(self, job_id: str) -> None:
    from knowledge import slim

    try:
        slim.slim_run(job_id=job_id, **task_claimant(self))
    except Exception as exc:  # noqa: BLE001 - a crashed job must say why, not stay "running"
        from jobs.services import job_fail

        job_fail(job_id=job_id, error=f"{type(exc).__name__}: {exc}")
        raise


@shared_task(ignore_result=True)
def embed_pending() -> int:
    """The worker's periodic sweep: vectors for items whose embedding message was lost or failed."""
    from knowledge.search.indexing import embed_pending as sweep

    return sweep()


@shared_task(ignore_result=True)
def forget_search_logs() -> int:
    """The beat's hourly sweep: delete agents' search logs older than KNOWHUB_SEARCH_LOG_RETENTION_DAYS."""
    from knowledge.search_log import search_logs_forget

    return search_logs_forget()
