"""Idempotent saves: a retried POST with the same `Idempotency-Key` gets the first reply, not a second item.

The key is per token (per principal for a caller without one, a person in the UI): two agents cannot collide, nor
can two tokens of one agent, whose scopes may differ (the reply would show one token's item to the other, and the
other's save would never be stored). Rows stored before keys were per token (`principal` alone, at most a day old)
still answer their agent's retries.

A key seen before gets its stored reply at once. A new one runs the request and, in its transaction, stores the
reply with one INSERT that writes nothing when the key was taken meanwhile: a concurrent request with the same key
makes it wait on the unique index until that one ends; if that one committed, this one's work is rolled back and
the committed reply replayed. (The key used to be claimed first, a row locked before the work and written again
after it: five more statements, a third of what a feedback report cost.) A failed request stores nothing, so it
may be retried with the same key. Replies are kept for a day (`forget_idempotent_replies`, hourly in the worker's
beat).
"""
import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.models import IdempotentReply
from core.compiled import insert_row

MAX_KEY_LENGTH = 200


class IdempotencyKeyError(ValueError):
    def __init__(self, message: str, *, status: int):
        super().__init__(message)
        self.message = message
        self.status = status


class _TakenMeanwhile(Exception):
    """Another request with the same key committed while this one ran: roll this one's work back."""


def request_hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def holder(principal: str, token_id: int | None) -> str:
    """Whose keys a stored reply answers (its `principal` column): the token's, else the principal's."""
    return principal if token_id is None else f"{principal} token:{token_id}"


def _stored(owner: str, principal: str, key: str) -> IdempotentReply | None:
    """The reply stored for the key: the token's, or one stored before keys were per token."""
    replies = {r.principal: r for r in IdempotentReply.objects.filter(principal__in={owner, principal}, key=key)}
    return replies.get(principal) or replies.get(owner)


def _replay(reply: IdempotentReply, key: str, operation: str, digest: str) -> tuple[int, Any, bool]:
    if reply.operation != operation or reply.request_hash != digest:
        raise IdempotencyKeyError(
            f"Idempotency-Key {key!r} was used for a different request ({reply.operation}); use a new key", status=409)
    return reply.status, reply.body, True


def idempotent_reply(*, principal: str, key: str | None, operation: str, data: Any,
                     run: Callable[[], tuple[int, Any]], token_id: int | None = None) -> tuple[int, Any, bool]:
    """(status, body, replayed): the reply stored for this token's (or principal's) `key`, else `run()`'s, stored.
    Without a key, just `run()`."""
    if not key:
        status, body = run()
        return status, body, False
    if len(key) > MAX_KEY_LENGTH:
        raise IdempotencyKeyError(f"Idempotency-Key is longer than {MAX_KEY_LENGTH} characters", status=400)
    digest, owner = request_hash(data), holder(principal, token_id)
    if (stored := _stored(owner, principal, key)) is not None:
        return _replay(stored, key, operation, digest)
    try:
        with transaction.atomic():
            status, body = run()
            reply = IdempotentReply(principal=owner, key=key, operation=operation, request_hash=digest, status=status,
                                    body=body)
            if insert_row(reply, unless_taken=True) is None:
                raise _TakenMeanwhile
    except _TakenMeanwhile:
        return _replay(IdempotentReply.objects.get(principal=owner, key=key), key, operation, digest)
    return status, body, False


KEEP_REPLIES_FOR = timedelta(hours=24)


def idempotent_replies_forget(*, older_than: timedelta = KEEP_REPLIES_FOR) -> int:
    """Delete stored replies older than `older_than` (a retry comes within minutes, not days)."""
    deleted, _ = IdempotentReply.objects.filter(created_at__lt=timezone.now() - older_than).delete()
    return deleted
