"""A tiny event bus: lower layers announce what happened without knowing who listens.

`emit` is called inside the service's transaction and hands the event to the listeners only once that
transaction commits (`transaction.on_commit`), so a rolled-back write announces nothing. `emit_all` announces
several events together (a batch's): a listener gets the events of one announcement in one call, so that it
can answer them all in a few queries. Listeners are registered by the apps above at start-up
(`webhooks.apps.WebhooksConfig.ready` registers the webhook fan-out), so knowledge, jobs and resources never
import webhooks. A listener that fails is logged and never fails the write that emitted the event: it has
committed already.

`scopes` are the scopes of what the event is about (an item's); None means the event has no scopes of its
own (a job), and a listener decides who may see it. `data` holds ids and small fields only: never a secret,
never a resource's body; an item's task and a truncated content (`excerpt`) are as much text as an event carries.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
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

    def __post_init__(self):
        if self.type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {self.type!r}")


Listener = Callable[[list[Event]], None]  # the events of one announcement, in the order emitted
_listeners: list[Listener] = []


def new_event_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


def listen(listener: Listener) -> Listener:
    """Register `listener` (registering the same one again is harmless); usable as a decorator."""
    if listener not in _listeners:
        _listeners.append(listener)
    return listener


def unlisten(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def event_new(event_type: str, *, scopes: list[str] | tuple[str, ...] | None, data: dict,
              event_id: str | None = None) -> Event:
    """An event to announce (ValueError for an unknown type)."""
    return Event(type=event_type, scopes=None if scopes is None else tuple(scopes), data=dict(data),
                 **({"id": event_id} if event_id else {}))


def emit(event_type: str, *, scopes: list[str] | tuple[str, ...] | None, data: dict, event_id: str | None = None) -> None:
    """Announce `event_type` once the current transaction commits (at once outside one).

    `event_id` makes a repeated announcement of the same fact the same event (a resource expiring is
    announced by every run of the periodic check; listeners keep one delivery per event id)."""
    emit_all([event_new(event_type, scopes=scopes, data=data, event_id=event_id)])


def emit_all(announced: list[Event]) -> None:
    """Announce `announced` together once the current transaction commits (at once outside one)."""
    announced = list(announced)
    if announced:
        transaction.on_commit(lambda: _dispatch(announced))


def _dispatch(announced: list[Event]) -> None:
    for listener in list(_listeners):
        try:
            listener(announced)
        except Exception:  # noqa: BLE001 - the write that emitted them has committed; a listener never undoes it
            logger.exception("event listener %r failed on %s", listener,
                             ", ".join(f"{event.type} {event.id}" for event in announced))


def knowledge_data(item, **extra) -> dict:
    """An item as an event carries it: ids and small fields, its task and the start of its content."""
    content = item.content or ""
    return {"knowledge_id": item.id, "task": item.task[:500],
            "excerpt": content if len(content) <= EXCERPT_CHARS else content[:EXCERPT_CHARS - 1] + "…",
            "types": list(item.types), "scopes": list(item.scopes), "status": item.status, **extra}
