"""Filters every deployment runs, whoever calls (the REST API, the MCP server, a command):

- require_caller (pre_invocation, -100): no operation runs without an authenticated caller;
  the caller's scopes then bound everything the operation reads or writes.
- validate_input (pre_invocation, -50): the raw `data` of an operation (and its other arguments)
  must be safe JSON (no NUL, no lone surrogate, at most 32 levels deep), then it is checked by its
  operation's input serializer (agents.operations) and replaced by the validated values (400 naming the field).
- audit_writes (post_invocation, 100): every write is recorded in the append-only audit log, in
  the write's own transaction (see `chain.invoke`); the recorded args are a bounded summary.
- redact_secrets (pre_chat, -100): known secrets never leave in a message to an LLM.
"""
import re

from django.http import QueryDict

from agents import operations
from agents.audit import audit_record
from agents.chain import Continue, Error, Filter, register
from core.errors import invalid_fields
from core.safe_json import json_problem


def require_caller(ctx):
    caller = ctx["context"].get("caller")
    if caller is None:
        return Error("no authenticated caller", status=401, code="not_authenticated")
    return Continue(ctx)


def _plain(data):
    """A query string's values as JSON would hold them: one value, or a list when repeated."""
    if isinstance(data, QueryDict):
        return {key: values[0] if len(values) == 1 else values for key, values in data.lists()}
    return data


def unsafe_input(args: dict) -> Error | None:
    found = None
    for name, value in args.items():
        found = json_problem(_plain(value)) if name == "data" else json_problem(value, path=name)
        if found:
            where, problem = found
            return Error(f"{where}: {problem}", status=400, code="invalid", fields={where: [problem]})
    return None


def validate_input(ctx):
    unsafe = unsafe_input(ctx["args"])
    if unsafe:
        return unsafe
    serializer_class = operations.input_of(ctx["operation"])
    if serializer_class is None or "data" not in ctx["args"]:
        return Continue(ctx)
    serializer = serializer_class(data=ctx["args"]["data"])
    if not serializer.is_valid():
        message, fields = invalid_fields(dict(serializer.errors))
        return Error(message, status=400, code="invalid", fields=fields)
    args = {key: value for key, value in ctx["args"].items() if key != "data"}
    return Continue({**ctx, "args": {**args, **serializer.validated_data}})


REQUIRE_CALLER = register(Filter("require_caller", "pre_invocation", require_caller, priority=-100))
VALIDATE_INPUT = register(Filter("validate_input", "pre_invocation", validate_input, priority=-50))

def _target(result, args) -> str:
    """What a write was about: the row it returned, else the id it was called with (an item, a conflict, a webhook
    subscription), else the id in its reply (webhook_delete's `{"id", "deleted"}`)."""
    replied = result.get("id") if isinstance(result, dict) else None
    for candidate in (getattr(result, "pk", None), args.get("knowledge_id"), args.get("conflict_id"),
                      args.get("webhook_id"), args.get("id"), replied):
        if candidate:
            return str(candidate)
    return ""


def audit_writes(ctx):
    if operations.writes(ctx["operation"]):
        ran_with = ctx.get("filtered_args", ctx["args"])
        audit_record(principal=ctx["context"]["caller"].principal, operation=ctx["operation"],
                     target=_target(ctx.get("result"), ran_with), args=ran_with)
    return Continue(ctx)


AUDIT_WRITES = register(Filter("audit_writes", "post_invocation", audit_writes, priority=100))


REDACTED = "[REDACTED]"


MIN_FRAGMENT = 6  # shorter pieces of a secret ("user", "密码") are words, not secrets
FRAGMENT_SEPARATORS = re.compile(r"[\s:=;,&|'\"：；，]+")


def secret_fragments(secret: str) -> set[str]:
    """What of a secret must never be quoted: the whole of it, each line, and each value in it
    (`密码:SecurePass123` → `SecurePass123`; `session_id=abc123; auth_token=xyz789` → `abc123`, `xyz789`, …)."""
    pieces = {secret, *secret.splitlines(), *FRAGMENT_SEPARATORS.split(secret)}
    return {piece.strip() for piece in pieces if len(piece.strip()) >= MIN_FRAGMENT} | {secret}


def redact_secrets(ctx):
    """Replace every known secret (ctx["context"]["secrets"]), and every fragment of one, wherever it
    appears inside the outgoing messages' text."""
    fragments = {f for s in ctx["context"].get("secrets", []) if s for f in secret_fragments(s)}
    if fragments:
        pattern = re.compile("|".join(re.escape(f) for f in sorted(fragments, key=len, reverse=True)))
        messages = [{**message, "content": pattern.sub(REDACTED, message.get("content") or "")}
                    for message in ctx["messages"]]
        ctx = {**ctx, "messages": messages}
    return Continue(ctx)


REDACT_SECRETS = register(Filter("redact_secrets", "pre_chat", redact_secrets, priority=-100))
