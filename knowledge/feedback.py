"""Feedback on knowledge: helpful/harmful cases and score changes.

A case is appended and its counter incremented in one transaction, and the
counter moves with `F() + 1` in an UPDATE, which locks the row: concurrent
reports queue up instead of overwriting each other.
"""
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core import events
from knowledge.models import FeedbackCase, Knowledge

MAX_CASE_KEYS = 20


def normalize_case(case: dict | None, *, reported_by: str) -> dict:
    case = dict(case or {})
    case.setdefault("timestamp", timezone.now().isoformat().replace("+00:00", "Z"))
    if reported_by:
        case.setdefault("reported_by", reported_by)
    return case


@transaction.atomic
def feedback_record(caller, *, knowledge_id: str, helpful: bool, case: dict | None = None, search_id=None) -> None:
    """`caller` reports whether the item helped (recorded as the case's reporter). Raises Knowledge.DoesNotExist
    when there is no such item.

    `search_id` names the logged search the item was found in (checked visible by the caller).
    """
    kind, reported_by = ("helpful" if helpful else "harmful"), caller.principal
    updated = Knowledge.objects.filter(pk=knowledge_id).update(**{kind: F(kind) + 1}, updated_at=timezone.now())
    if not updated:
        raise Knowledge.DoesNotExist(knowledge_id)
    FeedbackCase.objects.create(
        knowledge_id=knowledge_id, kind=kind, case=normalize_case(case, reported_by=reported_by), reported_by=reported_by,
        search_id=search_id,
    )
    # the case itself is the reporter's free text: the event names the item and the verdict only
    scopes = Knowledge.objects.filter(pk=knowledge_id).values_list("scopes", flat=True).get()
    events.emit(events.FEEDBACK_RECEIVED, scopes=scopes, data={
        "knowledge_id": knowledge_id, "kind": kind, "reported_by": reported_by,
        "search_id": None if search_id is None else str(search_id)})


def score_set(caller, *, knowledge_id: str, score: int) -> None:
    """Set the item's score; PermissionDenied unless `caller` may write one of its scopes."""
    from knowledge.services import require_write_any

    item = Knowledge.objects.filter(pk=knowledge_id).only("id", "scopes").first()
    if item is None:
        raise Knowledge.DoesNotExist(knowledge_id)
    require_write_any(caller, item)
    Knowledge.objects.filter(pk=knowledge_id).update(score=score, updated_at=timezone.now())
