"""Idempotent saves: a retried POST with the same `Idempotency-Key` gets the first reply, not a second item.

The key is per token (per principal for a caller without one, a person in the UI): two agents cannot collide, nor
can two tokens of one agent, whose scopes may differ (the reply would show one token's item to the other, and the
other's save would never be stored). Rows stored before keys were per token (`principal` alone, at most a day old)
still answer their agent's retries. The row is claimed
before the save runs, inside the save's transaction: a concurrent request with the
same key waits on the unique index and then replays the committed reply. A failed
save rolls the claim back, so a failed request may be retried with the same key.
Replies are kept for a day (`forget_idempotent_replies`, hourly in the worker's beat).
"""
import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.models import IdempotentReply

MAX_KEY_LENGTH = 200


class IdempotencyKeyError(ValueError):
    def __init__(self, message: str, *, status: int):
        super().__init__(message)
        self.message = message
        self.status = status


def request_hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def holder(principal: str, token_id: int | None) -> str:
    """Whose keys a stored reply answers (its `principal` column): the token's, else the principal's."""
    return principal if token_id is None else f"{principal} token:{token_id}"


def idempotent_reply(*, principal: str, key: str | None, operation: str, data: Any,
                     run: Callable[[], tuple[int, Any]], token_id: int | None = None) -> tuple[int, Any, bool]:
    """(status, body, replayed): the reply stored for this token's (or principal's) `key`, else `run()`'s, stored.
    Without a key, just `run()`."""
    if not key:
        status, body = run()
        return status, body, False
    if len(key) > MAX_KEY_LENGTH:
        raise IdempotencyKeyError(f"Idempotency-Key is longer than {MAX_KEY_LENGTH} characters", status=400)
    digest = request_hash(data)
    with transaction.atomic():
        owner = holder(principal, token_id)
        reply = None
        if owner != principal:  # a reply stored before keys were per token
            reply = IdempotentReply.objects.select_for_update().filter(principal=principal, key=key).first()
        created = False
        if reply is None:
            reply, created = IdempotentReply.objects.select_for_update().get_or_create(
                principal=owner, key=key,
                defaults={"operation": operation, "request_hash": digest, "status": 0, "body": None},
            )
        if not created:
            if reply.operation != operation or reply.request_hash != digest:
                raise IdempotencyKeyError(
                    f"Idempotency-Key {key!r} was used for a different request ({reply.operation}); use a new key",
                    status=409)
            return reply.status, reply.body, True
        status, body = run()
        reply.status, reply.body = status, body
        reply.save(update_fields=["status", "body"])
    return status, body, False


KEEP_REPLIES_FOR = timedelta(hours=24)


def idempotent_replies_forget(*, older_than: timedelta = KEEP_REPLIES_FOR) -> int:
    """Delete stored replies older than `older_than` (a retry comes within minutes, not days)."""
    deleted, _ = IdempotentReply.objects.filter(created_at__lt=timezone.now() - older_than).delete()
    return deleted
