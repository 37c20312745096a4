"""Sending deliveries (Celery): one attempt per message; a failed attempt sends the next with its backoff delay."""
import logging
from datetime import timedelta

from celery import shared_task
from django.utils import timezone

logger = logging.getLogger(__name__)

STALE_AFTER = timedelta(minutes=5)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def send_delivery(delivery_id: str, attempt: int, retries: bool = True) -> bool | None:
    """Attempt `attempt` of a delivery; with `retries`, a failure queues the next after its delay
    (KNOWHUB_WEBHOOK_RETRY_DELAYS). Returns whether it was delivered (None: not this attempt's turn)."""
    from webhooks.delivery import delivery_attempt

    outcome = delivery_attempt(delivery_id=delivery_id, attempt=attempt, retries=retries)
    if outcome is None:
        return None
    if outcome.retry_in is not None:
        send_delivery.apply_async((delivery_id, attempt + 1, retries), countdown=outcome.retry_in)
    return outcome.delivered


@shared_task
def resend_stale_deliveries() -> list[str]:
    """Beat: a pending delivery whose next attempt is long overdue lost its message (a broker restart, a killed
    worker): send it again (the attempt's claim makes a duplicate harmless)."""
    from webhooks.models import Delivery

    stale = Delivery.objects.filter(status=Delivery.Status.PENDING, next_attempt_at__lt=timezone.now() - STALE_AFTER)
    sent = []
    for delivery_id, attempts in stale.values_list("id", "attempts")[:500]:
        send_delivery.delay(str(delivery_id), attempts + 1)
        sent.append(str(delivery_id))
    if sent:
        logger.warning("re-sent %d stale webhook deliveries", len(sent))
    return sent
