"""Filters every deployment runs: audit logging of writes, redaction of secrets sent to an LLM.

Authentication and scope checks happen before the chain (DRF and the
caller's scopes, which every operation applies), input validation in the
operations' serializers.
"""
from agents.chain import Continue, Filter, register
from agents.models import AuditEvent

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
