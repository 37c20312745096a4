"""A tiny event bus: lower layers announce what happened without knowing who listens.

`emit` is called inside the service's transaction and hands the event to the listeners only once that
transaction commits (`transaction.on_commit`), so a rolled-back write announces nothing. Listeners are
registered by the apps above at start-up (`webhooks.apps.WebhooksConfig.ready` registers the webhook
fan-out), so knowledge, jobs and resources never import webhooks. A listener that fails is logged and
never fails the write that emitted the event: it has committed already.

`scopes` are the scopes of what the event is about (an item's); None means the event has no scopes of its
own (a job), and a listener decides who may see it. `data` holds ids and small fields only: never a secret,
never a resource's body; an item's task and a truncated content (`excerpt`) are as much text as an event carries.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

logger = logging.getLogger(__name__)

KNOWLEDGE_CREATED = "knowledge.created"
KNOWLEDGE_UPDATED = "knowledge.updated"
KNOWLEDGE_MERGED = "knowledge.merged"
KNOWLEDGE_SUPERSEDED = "knowledge.superseded"
KNOWLEDGE_ARCHIVED = "knowledge.archived"
CONFLICT_RAISED = "conflict.raised"
FEEDBACK_RECEIVED = "feedback.received"
JOB_FINISHED = "job.finished"
RESOURCE_EXPIRING = "resource.expiring"

EVENT_TYPES = (KNOWLEDGE_CREATED, KNOWLEDGE_UPDATED, KNOWLEDGE_MERGED, KNOWLEDGE_SUPERSEDED, KNOWLEDGE_ARCHIVED,
               CONFLICT_RAISED, FEEDBACK_RECEIVED, JOB_FINISHED, RESOURCE_EXPIRING)

EXCERPT_CHARS = 280  # how much of an item's content an event carries


@dataclass(frozen=True)
class Event:
    type: str
    scopes: tuple[str, ...] | None
    data: dict
    id: str = field(default_factory=lambda: new_event_id())
    timestamp: datetime = field(default_factory=timezone.now)


Listener = Callable[[Event], None]
_listeners: list[tuple[Callable, bool]] = []  # (listener, takes a list of the events committed together)


def new_event_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


def listen(listener: Callable, *, batches: bool = False) -> Callable:
    """Register `listener` (registering the same one again is harmless); usable as a decorator.

    With `batches` it is called once with the list of events one `emit_many` announced (a list of one for
    `emit`), so it can answer a bulk import's thousands of events with a query or two instead of one each."""
    if all(registered != listener for registered, _ in _listeners):
        _listeners.append((listener, batches))
    return listener


def unlisten(listener: Callable) -> None:
    _listeners[:] = [(registered, batches) for registered, batches in _listeners if registered != listener]


def emit(event_type: str, *, scopes: list[str] | tuple[str, ...] | None, data: dict, event_id: str | None = None) -> None:
    """Announce `event_type` once the current transaction commits (at once outside one).

    `event_id` makes a repeated announcement of the same fact the same event (a resource expiring is
    announced by every run of the periodic check; listeners keep one delivery per event id)."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    event = Event(type=event_type, scopes=None if scopes is None else tuple(scopes), data=dict(data),
                  **({"id": event_id} if event_id else {}))
    transaction.on_commit(lambda: _dispatch([event]))


def emit_many(event_type: str, announcements: Iterable[tuple[Iterable[str] | None, dict]]) -> None:
    """`emit` for many facts of one kind written together ((scopes, data) each): one commit hook, and listeners
    that take batches see them in one call."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    batch = [Event(type=event_type, scopes=None if scopes is None else tuple(scopes), data=dict(data))
             for scopes, data in announcements]
    if batch:
        transaction.on_commit(lambda: _dispatch(batch))


def _dispatch(batch: list[Event]) -> None:
    for listener, batches in list(_listeners):
        for events in ([batch] if batches else [[event] for event in batch]):
            try:
                listener(events if batches else events[0])
            except Exception:  # noqa: BLE001 - the write that emitted it has committed; a listener never undoes it
                logger.exception("event listener %r failed on %s %s", listener, events[0].type,
                                 ", ".join(event.id for event in events[:5]))


def knowledge_data(item, **extra) -> dict:
    """An item as an event carries it: ids and small fields, its task and the start of its content."""
    content = item.content or ""
    return {"knowledge_id": item.id, "task": item.task[:500],
            "excerpt": content if len(content) <= EXCERPT_CHARS else content[:EXCERPT_CHARS - 1] + "…",
            "types": list(item.types), "scopes": list(item.scopes), "status": item.status, **extra}
