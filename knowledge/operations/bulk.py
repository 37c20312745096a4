"""Bulk save: up to 500 new items in one call (issue 16), for agents and importers.

Each item is validated and checked on its own (the body of a single save here, then in `knowledge.bulk` the
caller's write access to its scopes and the resources it links, `services.check_new_item`, once), so a bad
item is reported at its index while the good ones land. The good ones are stored together through
`knowledge.bulk` (a few statements for the whole batch) and embedded by the worker in batches; if the database
refuses the batch, each item is stored on its own so that only the refused one fails.
"""
from django.db import DataError, IntegrityError, transaction
from rest_framework.exceptions import PermissionDenied

from agents.caller import Caller
from agents.operations import operation
from core.errors import DomainError, error_payload, invalid_fields
from knowledge import bulk, inputs, outputs


def _failed(position: int, code: str, message: str, fields: dict | None = None) -> dict:
    return {"index": position, "knowledge_id": None, "ok": False, "error": error_payload(code, message, fields)}


def _checked(caller: Caller, position: int, raw) -> tuple[dict | None, dict | None]:
    """(the entry ready for knowledge.bulk, None) or (None, its failed result). knowledge.bulk checks the rest."""
    prefix = f"items.{position}"
    entry = inputs.KnowledgeCreateInput(data=raw)
    if not entry.is_valid():
        message, fields = invalid_fields(entry.errors)
        return None, _failed(position, "invalid", f"{prefix}.{message}", {f"{prefix}.{k}": v for k, v in fields.items()})
    data = dict(entry.validated_data)
    try:
        data["scopes"] = caller.scopes_to_write(data.pop("scopes", None))
    except PermissionDenied as exc:
        return None, _refusal(position, exc)
    data["source"] = {"agent_id": caller.agent_id, **data.get("source", {})}
    return data, None


def _refusal(position: int, exc: Exception) -> dict:
    """The failed result of an item the checks refused (PermissionDenied, or a DomainError naming its field)."""
    if isinstance(exc, PermissionDenied):
        return _failed(position, "permission_denied", str(exc.detail))
    field = f"items.{position}.{exc.field}" if exc.field else f"items.{position}"
    return _failed(position, exc.code, f"{field}: {exc.message}", {field: [exc.message]})


def _store(caller: Caller, entries: list[dict]) -> list:
    """For each entry its stored item, or why it is not stored: the check's refusal (PermissionDenied, a
    DomainError), or the exception the database raised for it alone."""
    refusals: dict[int, Exception] = {}
    try:
        with transaction.atomic():
            stored = iter(bulk.knowledge_bulk_create(caller, entries, refused=refusals.__setitem__))
        return [refusals[i] if i in refusals else next(stored) for i in range(len(entries))]
    except (DataError, IntegrityError):
        outcomes: list = []
        for i, entry in enumerate(entries):
            if i in refusals:  # refused before the database was asked; that batch's rollback changed nothing it saw
                outcomes.append(refusals[i])
                continue
            try:
                with transaction.atomic():
                    outcomes.extend(bulk.knowledge_bulk_create(caller, [entry],
                                                               refused=lambda _, exc: outcomes.append(exc)))
            except (DataError, IntegrityError) as exc:
                outcomes.append(exc)
        return outcomes


@operation("knowledge_bulk_save", input=inputs.BulkSaveInput, output=outputs.BatchOutput, writes=True,
           permission="write")
def knowledge_bulk_save(caller: Caller, *, items) -> dict:
    """Save up to 500 new items; per-item results in order (good items land even when some fail)."""
    results: list[dict | None] = [None] * len(items)
    good: list[tuple[int, dict]] = []
    for position, raw in enumerate(items):
        entry, failure = _checked(caller, position, raw)
        if failure is not None:
            results[position] = failure
        else:
            good.append((position, entry))
    for (position, _), stored in zip(good, _store(caller, [entry for _, entry in good]), strict=True):
        if isinstance(stored, (PermissionDenied, DomainError)):
            results[position] = _refusal(position, stored)
        elif isinstance(stored, Exception):
            results[position] = _failed(position, "invalid", f"items.{position}: the database refused this item; "
                                        "it was not stored")
        else:
            results[position] = {"index": position, "knowledge_id": stored.id, "ok": True}
    failed = sum(1 for r in results if not r["ok"])
    return {"results": results, "succeeded": len(results) - failed, "failed": failed}
