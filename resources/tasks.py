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
    announce_expiring_resources()
    return ids


@shared_task
def announce_expiring_resources() -> list[str]:
    """`resource.expiring` for the resources expiring within KNOWHUB_RESOURCE_EXPIRING_DAYS (once each)."""
    from datetime import timedelta

    from django.conf import settings

    from resources.services import resources_announce_expiring

    return resources_announce_expiring(within=timedelta(days=settings.KNOWHUB_RESOURCE_EXPIRING_DAYS))
