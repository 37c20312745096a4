"""Subscriptions and deliveries: subscribe, change, pause and resume, delete, re-send; an event's fan-out.

Who may see an event: a subscription names scopes its maker could read when subscribing (none: every scope,
only for a person, who reads every scope). An event about scopes is delivered when they meet the
subscription's; an event without scopes of its own (a job) when its subject is visible through the same
rule the API uses (`Job.objects.visible_to`) for a reader of the subscription's scopes, or its maker asked
for it. Deliveries are created after the event's transaction committed and sent by `webhooks.tasks`.
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from rest_framework.exceptions import PermissionDenied

from agents.caller import Caller
from agents.visibility import may_read
from core import events
from core.errors import DomainError
from ingest.fetch import FetchRefused, check_url
from jobs.models import Job
from webhooks.models import Delivery, Subscription

logger = logging.getLogger(__name__)


class WebhookRefused(DomainError):
    status = 400
    code = "invalid"


class WebhookStateError(DomainError):
    status = 409
    code = "conflict"


def allow_list() -> list[str]:
    """What a webhook URL may point at although not public: the fetch allow-list and the webhooks' own."""
    return [*settings.KNOWHUB_FETCH_ALLOW, *settings.KNOWHUB_WEBHOOK_ALLOW]


def checked_url(url: str) -> str:
    try:
        return check_url(url, allow=allow_list())
    except FetchRefused as exc:
        raise WebhookRefused(str(exc), field="url") from None


def _checked_scopes(caller: Caller, scopes: list[str] | None) -> list[str]:
    """The scopes to deliver: those given, each readable by `caller`; none given: a token's readable scopes,
    a person's every scope (stored as [])."""
    scopes = list(dict.fromkeys(scopes or ()))
    if not scopes:
        return [] if caller.readable_scopes is None else list(caller.readable_scopes)
    unreadable = [s for s in scopes if not may_read(caller.readable_scopes, [s])]
    if unreadable:
        raise PermissionDenied(f"this caller may not read scope(s): {', '.join(unreadable)}")
    return scopes


def _checked_events(event_types: list[str]) -> list[str]:
    unknown = [t for t in event_types if t not in events.EVENT_TYPES]
    if unknown or not event_types:
        raise WebhookRefused(f"event types are some of {', '.join(events.EVENT_TYPES)}; got {unknown or 'none'}",
                             field="events")
    return list(dict.fromkeys(event_types))


def subscription_create(caller: Caller, *, url: str, event_types: list[str], scopes: list[str] | None = None,
                        description: str = "") -> Subscription:
    """A new active subscription with a fresh secret. WebhookRefused (400 naming `url` or `events`) for a URL that
    could never be sent to or an unknown event type; PermissionDenied for a scope the caller cannot read."""
    return Subscription.objects.create(
        url=checked_url(url), event_types=_checked_events(event_types), scopes=_checked_scopes(caller, scopes),
        description=description, created_by=caller.principal)


@transaction.atomic
def subscription_change(caller: Caller, *, subscription: Subscription, url: str | None = None,
                        event_types: list[str] | None = None, scopes: list[str] | None = None,
                        description: str | None = None, active: bool | None = None) -> Subscription:
    """Change what is given. `active=True` resumes a paused subscription (its failure count and reason cleared);
    `active=False` pauses it by hand."""
    sub = Subscription.objects.select_for_update().get(pk=subscription.pk)
    if url is not None:
        sub.url = checked_url(url)
    if event_types is not None:
        sub.event_types = _checked_events(event_types)
    if scopes is not None:
        sub.scopes = _checked_scopes(caller, scopes)
    if description is not None:
        sub.description = description
    if active is True:
        sub.active, sub.paused_reason, sub.consecutive_failures = True, "", 0
    elif active is False and sub.active:
        sub.active, sub.paused_reason = False, f"paused by {caller.principal}"
    sub.updated_at = timezone.now()
    sub.save()
    return sub


def subscription_delete(caller: Caller, *, subscription: Subscription) -> None:
    """Delete it and its delivery log; a delivery under way finds it gone and stops."""
    Subscription.objects.filter(pk=subscription.pk).delete()


def delivery_resend(caller: Caller, *, delivery: Delivery) -> Delivery:
    """Send a finished delivery again, once, with the same event id (a receiver may recognise it) and body."""
    if not Delivery.objects.filter(pk=delivery.pk, status__in=[Delivery.Status.SUCCEEDED, Delivery.Status.FAILED]).update(
            status=Delivery.Status.PENDING, next_attempt_at=timezone.now(), updated_at=timezone.now()):
        raise WebhookStateError(f"delivery {delivery.pk} is still being sent; re-send it once it has finished",
                                field="delivery_id")
    delivery.refresh_from_db()
    _send_on_commit(delivery, retries=False)
    return delivery


def _send_on_commit(delivery: Delivery, *, retries: bool) -> None:
    from webhooks.tasks import send_delivery

    attempt = delivery.attempts + 1
    transaction.on_commit(lambda: send_delivery.delay(str(delivery.pk), attempt, retries))


def _subscriber(sub: Subscription) -> Caller:
    """The subscription as a reader: its maker, reading its scopes (none: every scope)."""
    return Caller(principal=sub.created_by, agent_id=sub.created_by, readable_scopes=tuple(sub.scopes) or None,
                  writable_scopes=())


def _may_see(sub: Subscription, event: events.Event) -> bool:
    if event.scopes is not None:
        return not sub.scopes or bool(set(sub.scopes) & set(event.scopes))
    if event.type == events.JOB_FINISHED:
        return Job.objects.visible_to(_subscriber(sub)).filter(pk=event.data.get("job_id")).exists()
    return not sub.scopes  # an event without scopes of its own: only for those who read every scope


def payload_of(event: events.Event) -> dict:
    """The body every subscriber gets (Standard Webhooks' shape): type, timestamp, data."""
    return {"type": event.type, "timestamp": event.timestamp.isoformat().replace("+00:00", "Z"), "data": event.data}


def deliveries_for_event(event: events.Event) -> list[Delivery]:
    """The listener (`core.events.listen`): a pending delivery for each active subscription that wants `event` and
    may see it, sent by the worker. Announcing the same event id again delivers nothing new."""
    wanted = Subscription.objects.filter(active=True, event_types__contains=[event.type])
    if event.scopes is not None:
        wanted = wanted.filter(Q(scopes=[]) | Q(scopes__overlap=list(event.scopes)))
    created = []
    with transaction.atomic():
        for sub in wanted:
            if not _may_see(sub, event):
                continue
            try:
                with transaction.atomic():
                    delivery = Delivery.objects.create(subscription=sub, event_id=event.id, event_type=event.type,
                                                       payload=payload_of(event), next_attempt_at=timezone.now())
            except IntegrityError:  # this event was delivered to it before
                continue
            _send_on_commit(delivery, retries=True)
            created.append(delivery)
    return created
