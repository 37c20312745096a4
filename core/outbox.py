"""Celery messages written in the transaction of the write that sends them (a transactional outbox).

Inside `joining_transaction()`, a publish to the default broker, kombu's SQL transport on the application's own
database (`knowhub_site/broker.py`), is one INSERT in the transaction Django's connection is in: the message
reaches the worker when the write commits, and vanishes if it rolls back, with no commit of its own. A broker
elsewhere (Redis, RabbitMQ, another database) cannot join a transaction: `may_join_transactions()` says so before
anything is sent, and a publish that cannot join raises `CannotJoin` having sent nothing.
"""
import threading
from contextlib import contextmanager

_state = threading.local()


class CannotJoin(Exception):
    """A publish asked to join Django's transaction and could not (the broker is not on Django's database, or the
    message's queue has no row yet); nothing was sent."""


def may_join_transactions() -> bool:
    """Whether the configured broker is the one settings derive from DATABASE_URL (the default setup). Any other
    broker URL, even another spelling of the same database, is sent after the commit."""
    from django.conf import settings

    derived = getattr(settings, "KNOWHUB_DATABASE_BROKER_URL", "")
    return bool(derived) and getattr(settings, "CELERY_BROKER_URL", "") == derived


def joining() -> bool:
    """Whether this thread's publishes are to join Django's current transaction."""
    return getattr(_state, "active", False)


@contextmanager
def joining_transaction():
    """Publishes of this thread in this block are written in the transaction Django's connection is in."""
    previous = joining()
    _state.active = True
    try:
        yield
    finally:
        _state.active = previous
