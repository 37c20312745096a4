"""One delivery attempt: the signed request (Standard Webhooks), sent through the SSRF-safe POST, and its outcome.

Signature: `webhook-signature: v1,<base64 HMAC-SHA256>` of "{webhook-id}.{webhook-timestamp}.{body}", keyed with
the base64-decoded part of the secret after `whsec_`. The id is the event's (the same on every attempt and
re-send, so a receiver can drop repeats); the timestamp is the attempt's (receivers refuse old ones).

An attempt is claimed with a conditional UPDATE on the attempt number, so a message the broker delivers twice
sends once. A delivery fails when its last retry fails; `KNOWHUB_WEBHOOK_PAUSE_AFTER` failed deliveries in a row
pause the subscription with the reason shown; a success starts the count again.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from core.safe_json import UNSAFE_CHARACTERS
from ingest.fetch import FetchRefused, post
from webhooks.models import SECRET_PREFIX, Delivery, Subscription
from webhooks.services import allow_list

USER_AGENT = "KnowHub-webhooks/1"
RESPONSE_KEPT_BYTES = 2000


def storable(text: str, limit: int = 2000) -> str:
    """`text` as the database can store it: at most `limit` characters, a NUL or lone surrogate (which PostgreSQL
    refuses, failing the update and so repeating the delivery forever) replaced by U+FFFD."""
    return UNSAFE_CHARACTERS.sub("\ufffd", text[:limit])


def body_of(payload: dict) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def sign(secret: str, *, msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header's value for one message."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode("ascii")


def signed_headers(secret: str, *, msg_id: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    timestamp = int(time.time()) if timestamp is None else timestamp
    return {"content-type": "application/json", "user-agent": USER_AGENT, "webhook-id": msg_id,
            "webhook-timestamp": str(timestamp), "webhook-signature": sign(secret, msg_id=msg_id, timestamp=timestamp,
                                                                           body=body)}


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    retry_in: float | None  # seconds until the next attempt, None when there is none


def delivery_attempt(*, delivery_id: str, attempt: int, retries: bool = True) -> Outcome | None:
    """Make attempt number `attempt` of the delivery; None when it is not this attempt's turn (a repeated message,
    a deleted subscription)."""
    delivery = Delivery.objects.select_related("subscription").filter(pk=delivery_id).first()
    if delivery is None:
        return None
    sub = delivery.subscription
    if not sub.active and retries:
        Delivery.objects.filter(pk=delivery.pk, status=Delivery.Status.PENDING).update(
            status=Delivery.Status.FAILED, error=storable(f"not sent: the subscription is paused ({sub.paused_reason})"),
            next_attempt_at=None, updated_at=timezone.now())
        return Outcome(delivered=False, retry_in=None)
    now = timezone.now()
    if not Delivery.objects.filter(pk=delivery.pk, status=Delivery.Status.PENDING, attempts=attempt - 1).update(
            attempts=attempt, last_attempt_at=now, updated_at=now):
        return None
    body = body_of(delivery.payload)
    status, answer, error = None, "", ""
    try:
        posted = post(sub.url, content=body, headers=signed_headers(sub.secret, msg_id=delivery.event_id, body=body),
                      timeout=settings.KNOWHUB_WEBHOOK_TIMEOUT_SECONDS, allow=allow_list(),
                      max_response_bytes=RESPONSE_KEPT_BYTES)
        status, answer = posted.status_code, posted.body.decode("utf-8", "replace")
        if not 200 <= status < 300:
            error = f"{sub.url} answered HTTP {status}"
    except FetchRefused as exc:
        error = str(exc)
    delivered = not error
    delays = settings.KNOWHUB_WEBHOOK_RETRY_DELAYS if retries else []
    retry_in = None if delivered or attempt > len(delays) else float(delays[attempt - 1])
    if delivered:
        state = Delivery.Status.SUCCEEDED
    else:
        state = Delivery.Status.PENDING if retry_in is not None else Delivery.Status.FAILED
    Delivery.objects.filter(pk=delivery.pk, attempts=attempt).update(
        status=state, response_status=status, response_body=storable(answer, RESPONSE_KEPT_BYTES),
        error=storable(error), updated_at=timezone.now(),
        next_attempt_at=None if retry_in is None else timezone.now() + timedelta(seconds=retry_in))
    if retries and state != Delivery.Status.PENDING:
        _count(sub, delivered=delivered, error=storable(error))
    return Outcome(delivered=delivered, retry_in=retry_in)


def _count(sub: Subscription, *, delivered: bool, error: str) -> None:
    """A finished delivery: success resets the subscription's failure count, failure adds one and may pause it.
    (A person's re-send does not count either way: the count is about the subscription's own traffic.)"""
    subs = Subscription.objects.filter(pk=sub.pk)
    if delivered:
        subs.filter(consecutive_failures__gt=0).update(consecutive_failures=0)
        return
    subs.update(consecutive_failures=F("consecutive_failures") + 1)
    limit = settings.KNOWHUB_WEBHOOK_PAUSE_AFTER
    reason = f"paused after {limit} failed deliveries in a row; the last: {error}"[:500]
    subs.filter(active=True, consecutive_failures__gte=limit).update(
        active=False, paused_reason=reason, updated_at=timezone.now())
