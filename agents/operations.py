"""The operation registry: every agent-facing operation declared once, served alike everywhere.

An operation is a name, a `handler(caller, **args)`, the serializer its raw `data`
is validated with, the serializer its result is rendered with, whether it writes,
and the permission it needs. Each app declares its own in `<app>/operations.py`
(imported by the app's `ready()`); the REST views, the MCP tools, the chain's
input validation and write audit, and the parity test all read this registry, so
an operation that is declared here cannot be served without the filter chain, and
cannot write without being audited.

    run("knowledge_get", caller, knowledge_id="knowledge-…")   # through the chain, rendered

`run` passes `args` (path parameters, request facts) and `data` (the raw body or
query) to `chain.invoke`: the pre-invocation filters check the caller, validate
`data` with the input serializer and spread the validated fields into the
handler's keyword arguments; a write then runs with its post-invocation filters
(the audit among them) in one transaction.
"""
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from rest_framework.exceptions import PermissionDenied

from agents.caller import Caller
from core import metrics, request_context

# What a caller must hold: any role (read); not read-only (feedback: viewers may not, any token may);
# write access to some scope (write); the curator role or a curator token (curate). Finer checks
# (which scopes, whose item) are the handler's.
PERMISSIONS = ("read", "feedback", "write", "curate")
# Marked for translation here, translated when raised (in the request's language).
READ_ONLY_REFUSED = gettext_noop("read-only access: {name} needs the curator role or a token")
NO_WRITE_SCOPE = gettext_noop("{name} writes, and this caller may not write to any scope")
NOT_A_CURATOR = gettext_noop("{name} is a curator's operation: it needs the curator role, or a curator token (can_curate)")


@dataclass(frozen=True)
class Operation:
    name: str
    handler: Callable[..., Any]  # handler(caller, **args): a model instance or a JSON-ready dict
    summary: str
    input: type | None = None  # DRF serializer for the raw `data`; None: the operation takes no body
    output: type | None = None  # DRF serializer rendering the result (model or dict); None: already JSON
    writes: bool = False
    permission: str = "read"
    status: int = 200  # the HTTP status of a success

    def __post_init__(self):
        if self.permission not in PERMISSIONS:
            raise ValueError(f"operation {self.name!r}: permission must be one of {', '.join(PERMISSIONS)}")
        if self.writes and self.permission == "read":
            raise ValueError(f"operation {self.name!r} writes, so it needs the feedback or write permission")

    def render(self, result: Any) -> Any:
        """The reply as JSON: the handler's model or dict through the output serializer (None: as it is)."""
        return result if self.output is None else self.output(result).data


_registry: dict[str, Operation] = {}


def register(operation: Operation) -> Operation:
    if operation.name in _registry and _registry[operation.name] != operation:
        raise ValueError(f"operation {operation.name!r} is declared twice")
    _registry[operation.name] = operation
    return operation


def operation(name: str, **declaration) -> Callable[[Callable], Callable]:
    """Decorator: declare `handler` as the operation `name` (its docstring's first line is the summary)."""

    def declare(handler: Callable) -> Callable:
        summary = handler.__doc__.strip().splitlines()[0] if handler.__doc__ else name
        register(Operation(name=name, handler=handler, summary=summary, **declaration))
        return handler

    return declare


def get(name: str) -> Operation:
    return _registry[name]


def registered() -> dict[str, Operation]:
    return dict(sorted(_registry.items()))


def writes(name: str) -> bool:
    """Whether `name` is a write (unknown names are not: the chain also runs LLM-side helpers)."""
    found = _registry.get(name)
    return bool(found and found.writes)


def input_of(name: str) -> type | None:
    found = _registry.get(name)
    return found.input if found else None


def check_permission(op: Operation, caller: Caller) -> None:
    """The operation's declared permission; PermissionDenied (403) naming it otherwise."""
    if op.permission == "read":
        return
    if caller.read_only:
        raise PermissionDenied(_(READ_ONLY_REFUSED).format(name=op.name))
    if op.permission in ("write", "curate") and caller.writable_scopes is not None and not caller.writable_scopes:
        raise PermissionDenied(_(NO_WRITE_SCOPE).format(name=op.name))
    if op.permission == "curate" and not caller.curates:
        raise PermissionDenied(_(NOT_A_CURATOR).format(name=op.name))


def call(name: str, caller: Caller, *, data: Any = None, **args) -> Any:
    """The operation's raw result (a model instance or a dict), through the filter chain."""
    from agents.chain import invoke

    op = get(name)

    def handler(*, context, **arguments):  # after the pre-invocation filters (no caller: 401 first)
        check_permission(op, context["caller"])  # again: a pre filter may have changed the context's caller
        return op.handler(context["caller"], **arguments)

    arguments = {**args, "data": {} if data is None else data} if op.input is not None else dict(args)
    request_context.note_operation(name)
    entry = request_context.entry()
    status = "500"
    try:
        if caller is not None:  # before the filters: a caller refused the operation learns nothing of its input's
            check_permission(op, caller)  # validation (400) and no deployment filter's answer (Skip) reaches it
        with metrics.timed(metrics.OPERATION_SECONDS, operation=name, entry=entry):
            result = invoke(name, handler, arguments, {"caller": caller})
        status = str(op.status)
        return result
    except Exception as exc:
        status = metrics.error_status(exc)
        raise
    finally:
        metrics.OPERATION_CALLS.labels(operation=name, entry=entry, status=status).inc()


def run(name: str, caller: Caller, *, data: Any = None, **args) -> Any:
    """The operation's reply as JSON (rendered by its output serializer), through the filter chain."""
    return get(name).render(call(name, caller, data=data, **args))
