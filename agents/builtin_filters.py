"""Filters every deployment runs, whoever calls (the REST API, the MCP server, a command):

- require_caller (pre_invocation, -100): no operation runs without an authenticated caller;
  the caller's scopes then bound everything the operation reads or writes.
- validate_input (pre_invocation, -50): the raw `data` of an operation is checked by its
  registered input serializer and replaced by the validated values (400 naming the field).
- audit_writes (post_invocation, 100): every write is recorded in the append-only audit log.
- redact_secrets (pre_chat, -100): known secrets never leave in a message to an LLM.
"""
from agents.chain import Continue, Error, Filter, register
from agents.models import AuditEvent

INPUTS: dict[str, type] = {}


def register_input(operation: str, serializer_class: type) -> None:
    INPUTS[operation] = serializer_class


def require_caller(ctx):
    caller = ctx["context"].get("caller")
    if caller is None:
        return Error("no authenticated caller", status=401, code="not_authenticated")
    return Continue(ctx)


def validate_input(ctx):
    serializer_class = INPUTS.get(ctx["operation"])
    if serializer_class is None or "data" not in ctx["args"]:
        return Continue(ctx)
    serializer = serializer_class(data=ctx["args"]["data"])
    if not serializer.is_valid():
        from knowledge.api.errors import first_message

        fields = dict(serializer.errors)
        name = next(iter(fields), "non_field_errors")
        return Error(f"{name}: {first_message(fields.get(name, 'invalid input'))}", status=400, code="invalid", fields=fields)
    args = {key: value for key, value in ctx["args"].items() if key != "data"}
    return Continue({**ctx, "args": {**args, **serializer.validated_data}})


REQUIRE_CALLER = register(Filter("require_caller", "pre_invocation", require_caller, priority=-100))
VALIDATE_INPUT = register(Filter("validate_input", "pre_invocation", validate_input, priority=-50))

WRITE_OPERATIONS = {"knowledge_save", "knowledge_update", "knowledge_edit", "knowledge_batch_update", "knowledge_slim",
                    "resource_save"}
SECRET_ARGS = {"secure_body"}
MAX_ARG_CHARS = 500


def _summary(value):
    if isinstance(value, str):
        return value if len(value) <= MAX_ARG_CHARS else value[:MAX_ARG_CHARS] + "…"
    if isinstance(value, dict):
        return {k: "[secret]" if k in SECRET_ARGS else _summary(v) for k, v in list(value.items())[:50]}
    if isinstance(value, (list, tuple)):
        return [_summary(v) for v in value[:50]]
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    return str(value)[:MAX_ARG_CHARS]


def _target(result, args) -> str:
    for candidate in (getattr(result, "pk", None), args.get("knowledge_id"), args.get("id")):
        if candidate:
            return str(candidate)
    return ""


def audit_writes(ctx):
    if ctx["operation"] in WRITE_OPERATIONS:
        AuditEvent.objects.create(
            principal=ctx["context"]["caller"].principal, operation=ctx["operation"],
            target=_target(ctx.get("result"), ctx["args"]), args=_summary(ctx["args"]),
        )
    return Continue(ctx)


AUDIT_WRITES = register(Filter("audit_writes", "post_invocation", audit_writes, priority=100))


REDACTED = "[REDACTED]"


def redact_secrets(ctx):
    """Replace every known secret (ctx["context"]["secrets"]) in the outgoing messages."""
    secrets = sorted({s for s in ctx["context"].get("secrets", []) if s}, key=len, reverse=True)
    if secrets:
        messages = []
        for message in ctx["messages"]:
            content = message.get("content") or ""
            for secret in secrets:
                content = content.replace(secret, REDACTED)
                # A multi-line secret may be quoted line by line: redact its lines too.
                for line in secret.splitlines():
                    if len(line.strip()) >= 6:
                        content = content.replace(line, REDACTED)
            messages.append({**message, "content": content})
        ctx = {**ctx, "messages": messages}
    return Continue(ctx)


REDACT_SECRETS = register(Filter("redact_secrets", "pre_chat", redact_secrets, priority=-100))
