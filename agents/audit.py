"""The append-only audit log: every write, who made it, on what, with a bounded summary of its arguments.

Writes through the filter chain are recorded by its `audit_writes` filter; writes made
elsewhere (the admin) call `audit_record` themselves.
"""
from agents.models import AuditEvent
from core.compiled import insert_row
from core.safe_json import UNSAFE_CHARACTERS

SECRET_ARGS = {"secure_body", "passphrase", "file_bytes"}  # never stored: secrets, and the bytes of an imported file
MAX_ARG_CHARS = 500
MAX_ITEMS = 50  # per object or list
MAX_SUMMARY_DEPTH = 6
MAX_SUMMARY_NODES = 2_000  # values in the whole summary


def _text(value: str) -> str:
    """At most MAX_ARG_CHARS characters, none the database refuses (NUL, lone surrogates)."""
    value = UNSAFE_CHARACTERS.sub("\ufffd", value)
    return value if len(value) <= MAX_ARG_CHARS else value[:MAX_ARG_CHARS] + "…"


def audit_summary(value, depth: int = 0, budget: list | None = None):
    """A bounded, storable copy of an operation's args: safe on any depth, size or character."""
    budget = [MAX_SUMMARY_NODES] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0:
        return "…"
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, (bool, int)) or value is None:
        return value if not isinstance(value, int) or abs(value) < 2 ** 63 else _text(str(value))
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_SUMMARY_DEPTH:
        return "…"
    if isinstance(value, dict):
        return {_text(str(k)): "[secret]" if k in SECRET_ARGS else audit_summary(v, depth + 1, budget)
                for k, v in list(value.items())[:MAX_ITEMS]}
    if isinstance(value, (list, tuple)):
        return [audit_summary(v, depth + 1, budget) for v in value[:MAX_ITEMS]]
    return _text(str(value))


def audit_record(*, principal: str, operation: str, target: str = "", args: dict | None = None) -> AuditEvent:
    """One audit row; `args` is stored as its bounded, secret-free summary."""
    return insert_row(AuditEvent(principal=principal, operation=operation, target=str(target)[:255],
                                 args=audit_summary(args or {})))
