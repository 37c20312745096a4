"""Bulk save: up to 500 new items in one call (issue 16), for agents and importers.

Each item is validated and checked on its own (the body of a single save, the caller's write access to its
scopes, the resources it links), so a bad item is reported at its index while the good ones land. The good
ones are stored together through `knowledge.bulk` (a few statements for the whole batch) and embedded by
the worker in batches; if the database refuses the batch, each item is stored on its own so that only the
refused one fails.
"""
from django.db import DataError, IntegrityError, transaction
from rest_framework.exceptions import PermissionDenied

from agents.caller import Caller
from agents.operations import operation
from core.errors import DomainError, error_payload, invalid_fields
from knowledge import bulk, inputs, outputs, services


def _failed(position: int, code: str, message: str, fields: dict | None = None) -> dict:
    return {"index": position, "knowledge_id": None, "ok": False, "error": error_payload(code, message, fields)}


def _checked(caller: Caller, position: int, raw) -> tuple[dict | None, dict | None]:
    """(the entry ready for knowledge.bulk, None) or (None, its failed result)."""
    prefix = f"items.{position}"
    entry = inputs.KnowledgeCreateInput(data=raw)
    if not entry.is_valid():
        message, fields = invalid_fields(entry.errors)
        return None, _failed(position, "invalid", f"{prefix}.{message}", {f"{prefix}.{k}": v for k, v in fields.items()})
    data = dict(entry.validated_data)
    try:
        data["scopes"] = caller.scopes_to_write(data.pop("scopes", None))
        services.check_new_item(caller, scopes=data["scopes"], resource_ids=data.get("resource_ids", ()),
                                secure_resource_id=data.get("secure_resource_id", ""))
    except PermissionDenied as exc:
        return None, _failed(position, "permission_denied", str(exc.detail))
    except DomainError as exc:
        field = f"{prefix}.{exc.field}" if exc.field else prefix
        return None, _failed(position, exc.code, f"{field}: {exc.message}", {field: [exc.message]})
    data["source"] = {"agent_id": caller.agent_id, **data.get("source", {})}
    return data, None


def _store(caller: Caller, entries: list[dict]) -> list:
    """The stored items, or for each entry the item or the exception the database raised for it alone."""
    try:
        with transaction.atomic():
            return bulk.knowledge_bulk_create(caller, entries)
    except (DataError, IntegrityError):
        stored = []
        for entry in entries:
            try:
                with transaction.atomic():
                    stored.extend(bulk.knowledge_bulk_create(caller, [entry]))
            except (DataError, IntegrityError) as exc:
                stored.append(exc)
        return stored


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
    for (position, _), stored in zip(good, _store(caller, [entry for _, entry in good])):
        if isinstance(stored, Exception):
            results[position] = _failed(position, "invalid", f"items.{position}: the database refused this item; "
                                        "it was not stored")
        else:
            results[position] = {"index": position, "knowledge_id": stored.id, "ok": True}
    failed = sum(1 for r in results if not r["ok"])
    return {"results": results, "succeeded": len(results) - failed, "failed": failed}
