"""What every log line and metric of one request or job needs to know: its request id, entry, agent, operation.

One mutable `Context` per request (or job) lives in a contextvar: the HTTP middleware
(`knowhub_site.request_log`) or the worker's `task_prerun` (`knowhub_site.job_observability`)
starts it, inner code fills it in (`agents.operations.call` names the operation), and the
log formatter and the request's log line read it. Outside any request or job there is none.
"""
import re
import uuid
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Iterator

# An incoming X-Request-ID is kept only when it is short and plain (it lands in logs and headers).
REQUEST_ID_PATTERN = re.compile(r"^[A-Za-z0-9._:-]{8,64}$")


@dataclass
class Context:
    request_id: str
    entry: str = "internal"  # rest | ui | mcp | job | internal: which surface an operation was called through
    agent: str = ""  # the token's agent id, or user:<id>
    operation: str = ""  # the registered operation that ran, if one did


_current: ContextVar[Context | None] = ContextVar("knowhub_request_context", default=None)


def new_request_id() -> str:
    return uuid.uuid4().hex


def request_id_from(incoming: str | None) -> str:
    """The client's id when it is sane (8-64 of A-Z a-z 0-9 . _ : -), otherwise a new one."""
    return incoming if incoming and REQUEST_ID_PATTERN.match(incoming) else new_request_id()


def current() -> Context | None:
    return _current.get()


def enter(context: Context) -> Token:
    """Make `context` the current one until `leave(token)` (for start/end hooks such as Celery's signals)."""
    return _current.set(context)


def leave(token: Token) -> None:
    _current.reset(token)


@contextmanager
def bound(context: Context) -> Iterator[Context]:
    """`context` is the current one inside the block."""
    token = enter(context)
    try:
        yield context
    finally:
        leave(token)


def entry() -> str:
    found = _current.get()
    return found.entry if found else "internal"


def note_operation(name: str) -> None:
    """Record the operation a request ran (the first one: an operation calling another keeps the outer name)."""
    found = _current.get()
    if found is not None and not found.operation:
        found.operation = name
