"""The filter chain of seed 004: every operation and every LLM call runs through it.

A filter is a name, a type (pre_invocation, post_invocation, pre_chat,
post_chat), a handler and a priority (lower runs first, default 0). A handler
takes the filter context (a dict) and returns one of

    Continue(ctx)   go on with a possibly changed context
    Skip(value)     stop here; `value` is the result
    Error(reason)   stop here; the call fails with `reason`

An exception inside a handler becomes Error naming the filter, never a crash
(and never the text of a database error, which may quote SQL and values).

Post-invocation filters see the original arguments as `args` (seed 004) and the ones the
operation ran with as `filtered_args`.

A write operation (declared `writes=True` in agents.operations) runs its handler and the post-invocation
filters in one transaction: a post filter's Error or failure (the audit row not
stored, say) rolls the write back, so nothing lands that the caller is told failed.
Deployments add filters by dotted path in KNOWHUB_FILTERS; tests use
`registered_temporarily`.
"""
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils.module_loading import import_string

from agents.operations import writes
from core.errors import DATABASE_DOWN, DomainError

logger = logging.getLogger(__name__)

FILTER_TYPES = ("pre_invocation", "post_invocation", "pre_chat", "post_chat")


@dataclass(frozen=True)
class Continue:
    context: dict


@dataclass(frozen=True)
class Skip:
    value: Any


@dataclass(frozen=True)
class Error:
    reason: str
    filter: str = ""
    status: int = 400
    code: str = "filter_error"
    fields: dict = field(default_factory=dict)
    retry_after: int | None = None  # seconds; sent as Retry-After (a 429 or 503 always carries one)


@dataclass(frozen=True)
class Filter:
    name: str
    type: str
    handler: Callable[[dict], "Continue | Skip | Error"]
    priority: int = 0

    def __post_init__(self):
        if self.type not in FILTER_TYPES:
            raise ValueError(f"filter {self.name!r}: type must be one of {', '.join(FILTER_TYPES)}")


class ChainError(DomainError):
    """Raised by `invoke` when a filter or the operation ends in Error; the API answers with its status."""

    def __init__(self, error: Error):
        super().__init__(error.reason, retry_after=error.retry_after)
        self.error = error
        self.status, self.code = error.status, error.code

    def api_fields(self) -> dict:
        return self.error.fields

    def api_message(self) -> str:
        # A field's error starts with the field (the API's shape); others name the filter that refused.
        return f"{self.error.filter}: {self.error.reason}" if self.error.filter and not self.error.fields else self.error.reason


_registered: list[Filter] = []


def register(f: Filter) -> Filter:
    _registered.append(f)
    return f


@contextmanager
def registered_temporarily(*filters: Filter) -> Iterator[None]:
    _registered.extend(filters)
    try:
        yield
    finally:
        for f in filters:
            _registered.remove(f)


def active_filters(filter_type: str) -> list[Filter]:
    configured = [import_string(path) for path in getattr(settings, "KNOWHUB_FILTERS", [])]
    chosen = [f for f in [*_registered, *configured] if f.type == filter_type]
    return sorted(chosen, key=lambda f: f.priority)  # stable: registration order breaks ties


def run_chain(filter_type: str, ctx: dict) -> "Continue | Skip | Error":
    for f in active_filters(filter_type):
        try:
            outcome = f.handler(ctx)
        except DATABASE_DOWN:
            raise  # the database went away under the filter: the API's 503 `unavailable` with Retry-After, like anywhere else
        except Exception as exc:  # noqa: BLE001 - a broken filter is an error result, not a 500
            logger.exception("filter %s failed", f.name)
            # 503, not 500: the call failed in a deployment's filter, and says which.
            detail = "" if isinstance(exc, DatabaseError) else f": {exc}"
            return Error(reason=f"filter {f.name} failed: {type(exc).__name__}{detail}", filter=f.name, status=503,
                         code="filter_failed")
        if isinstance(outcome, Continue):
            ctx = outcome.context
        elif isinstance(outcome, (Skip, Error)):
            if isinstance(outcome, Error) and not outcome.filter:
                outcome = Error(**{**outcome.__dict__, "filter": f.name})
            return outcome
        else:
            return Error(reason=f"filter {f.name} returned {outcome!r}, not Continue/Skip/Error", filter=f.name,
                         status=503, code="filter_failed")
    return Continue(ctx)


def invoke(operation: str, handler: Callable[..., Any], args: dict, context: dict) -> Any:
    """Run `handler(**args, context=context)` between the pre and post invocation filters."""
    pre = run_chain("pre_invocation", {"operation": operation, "args": dict(args), "context": context, "metadata": {}})
    if isinstance(pre, Skip):
        return pre.value
    if isinstance(pre, Error):
        raise ChainError(pre)
    ctx = pre.context
    with transaction.atomic() if writes(operation) else nullcontext():
        result = handler(**ctx["args"], context=ctx["context"])
        # Seed 004: post filters see the call's original arguments as `args`; what the handler ran with
        # (validated, changed by pre filters) is `filtered_args`.
        post = run_chain("post_invocation", {**ctx, "args": dict(args), "filtered_args": ctx["args"], "result": result})
        if isinstance(post, Error):
            raise ChainError(post)  # leaving the block rolls a write back
    return post.value if isinstance(post, Skip) else post.context["result"]


def chat(messages: list[dict], context: dict, send: Callable[[list[dict]], Any]) -> Any:
    """Run an LLM call, `send(messages)`, between the pre and post chat filters."""
    pre = run_chain("pre_chat", {"messages": list(messages), "context": context, "metadata": {}})
    if isinstance(pre, Skip):
        return pre.value
    if isinstance(pre, Error):
        raise ChainError(pre)
    result = send(pre.context["messages"])
    post = run_chain("post_chat", {**pre.context, "result": result})
    if isinstance(post, Error):
        raise ChainError(post)
    return post.value if isinstance(post, Skip) else post.context["result"]
