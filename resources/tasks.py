"""Periodic resource upkeep (Celery beat, started by `make run`)."""
import logging

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task
def mark_expired_resources() -> list[str]:
    from resources.services import resources_mark_expired

    ids = resources_mark_expired()
    if ids:
        logger.warning("resources expired: %s", ", ".join(ids))
    return ids
