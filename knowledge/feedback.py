"""Feedback on knowledge: helpful/harmful cases and score changes.

A case is appended and its counter incremented in one transaction. The counter moves by arithmetic in
one UPDATE (never read, changed and written back in Python), which locks the item's row until the
transaction ends: concurrent reports queue up instead of overwriting each other. Because that lock is
held until the commit, the UPDATE comes last: the case is inserted first (its foreign key is checked at
the commit and does not wait for the lock), and the UPDATE returns what the event and the reply need
(the item's scopes and counters) instead of a second read.
"""
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db import DataError, IntegrityError, connection, transaction
from django.utils import timezone

from core import events
from core.compiled import insert_row
from knowledge.models import FeedbackCase, Knowledge, KnowledgeStatus

MAX_CASE_KEYS = 20


@dataclass(frozen=True)
class Tally:
    """An item's evaluation as its counter UPDATE left it (committed once the transaction is)."""

    helpful: int
    harmful: int
    score: int
    scopes: list[str]
    updated_at: datetime
    merged_into: str | None = None  # the item this one was merged into, when it was


def normalize_case(case: dict | None, *, reported_by: str) -> dict:
    case = dict(case or {})
    case.setdefault("timestamp", timezone.now().isoformat().replace("+00:00", "Z"))
    if reported_by:
        case.setdefault("reported_by", reported_by)
    return case


def kind_of(helpful: bool) -> str:
    return "helpful" if helpful else "harmful"


def case_new(caller, *, knowledge_id: str, helpful: bool, case: dict | None, search_id=None) -> FeedbackCase:
    """An unsaved case reported by `caller`, its text normalized (timestamp, reporter)."""
    return FeedbackCase(knowledge_id=knowledge_id, kind=kind_of(helpful), reported_by=caller.principal,
                        case=normalize_case(case, reported_by=caller.principal), search_id=search_id)


def _counter_update_sql() -> str:
    quote, fields = connection.ops.quote_name, {f.name: f.column for f in Knowledge._meta.concrete_fields}
    helpful, harmful = quote(fields["helpful"]), quote(fields["harmful"])
    return (f"UPDATE {quote(Knowledge._meta.db_table)} SET {helpful} = {helpful} + %s, {harmful} = {harmful} + %s, "
            f"{quote(fields['updated_at'])} = %s WHERE {quote(fields['id'])} = %s "
            f"RETURNING {helpful}, {harmful}, {quote(fields['score'])}, {quote(fields['scopes'])}, "
            f"{quote(fields['updated_at'])}, CASE WHEN {quote(fields['status'])} = %s THEN {quote(fields['merged_into'])} END")


def counters_add(*, knowledge_id: str, helpful: int = 0, harmful: int = 0) -> Tally:
    """Add to the item's counters in one UPDATE, which holds the row's lock until the transaction ends: call it
    last. Raises Knowledge.DoesNotExist when there is no such item."""
    with connection.cursor() as cursor:
        cursor.execute(_counter_update_sql(), [helpful, harmful, timezone.now(), knowledge_id, KnowledgeStatus.MERGED])
        row = cursor.fetchone()
    if row is None:
        raise Knowledge.DoesNotExist(knowledge_id)
    return Tally(*row)


def feedback_event(case: FeedbackCase, scopes: list[str]) -> events.Event:
    # the case itself is the reporter's free text: the event names the item and the verdict only
    return events.event_new(events.FEEDBACK_RECEIVED, scopes=scopes, data={
        "knowledge_id": case.knowledge_id, "kind": case.kind, "reported_by": case.reported_by,
        "search_id": None if case.search_id is None else str(case.search_id)})


@transaction.atomic(savepoint=False)  # all or nothing; inside a caller's transaction, no savepoint of its own
def feedback_record(caller, *, knowledge_id: str, helpful: bool, case: dict | None = None,
                    search_id=None) -> tuple[FeedbackCase, Tally]:
    """`caller` reports whether the item helped (recorded as the case's reporter): the stored case and the
    item's counters after it. Raises Knowledge.DoesNotExist when there is no such item.

    `search_id` names the logged search the item was found in (checked visible by the caller).
    """
    stored = insert_row(case_new(caller, knowledge_id=knowledge_id, helpful=helpful, case=case, search_id=search_id))
    tally = counters_add(knowledge_id=knowledge_id, **{stored.kind: 1})
    events.emit_all([feedback_event(stored, tally.scopes), *_forwarded(stored, tally)])
    return stored, tally


MERGES_FOLLOWED = 10  # an item merged into one merged in turn...: how far a report follows


def _forwarded(case: FeedbackCase, tally: Tally, depth: int = 0) -> list[events.Event]:
    """A report on an item merged away counts for the item it became too, as the merge counted the reports before
    it (their cases copied, the counters summed): the agent found the original before the merge, and its verdict
    is about the text the merged item now holds. The original keeps its own (unmerging gives it back as it was).
    The counters' UPDATE waits for a merge's lock on the row, so a report that arrives while a merge commits is
    either counted by the merge or forwarded here, never lost. Returns the events of the copies."""
    if tally.merged_into is None or depth >= MERGES_FOLLOWED:
        return []
    copy = insert_row(FeedbackCase(knowledge_id=tally.merged_into, kind=case.kind, reported_by=case.reported_by,
                                   case=case.case, search_id=case.search_id))
    target = counters_add(knowledge_id=copy.knowledge_id, **{copy.kind: 1})
    return [feedback_event(copy, target.scopes), *_forwarded(copy, target, depth + 1)]


def feedback_record_batch(caller, reports: list[dict]) -> list[bool]:
    """`caller` reports on many items at once, each report the keyword arguments of `feedback_record`: whether
    each landed, in order. A report the database refuses is left out and the others land (one INSERT for all;
    a savepoint per report only when that INSERT is refused). Each item's counters then move in one UPDATE,
    items in id order, so that concurrent batches lock rows in the same order and never deadlock, and the events
    are announced together (the listeners answer them in a few queries). Raises Knowledge.DoesNotExist when an
    item is gone; call it inside a transaction."""
    cases = [case_new(caller, **report) for report in reports]
    if not cases:
        return []
    try:
        with transaction.atomic():  # inserted in item id order too: each insert share-locks its item (the foreign key)
            FeedbackCase.objects.bulk_create(sorted(cases, key=lambda case: case.knowledge_id))
        landed = [True] * len(cases)
    except (DataError, IntegrityError):
        landed = [_stored_alone(case) for case in cases]
    counts: dict[str, Counter] = defaultdict(Counter)
    for case, ok in zip(cases, landed):
        if ok:
            counts[case.knowledge_id][case.kind] += 1
    tallies = {knowledge_id: counters_add(knowledge_id=knowledge_id, **counts[knowledge_id])
               for knowledge_id in sorted(counts)}
    stored = [case for case, ok in zip(cases, landed) if ok]
    events.emit_all([feedback_event(case, tallies[case.knowledge_id].scopes) for case in stored]
                    + [event for case in stored for event in _forwarded(case, tallies[case.knowledge_id])])
    return landed


def _stored_alone(case: FeedbackCase) -> bool:
    try:
        with transaction.atomic():  # a savepoint: a refused entry leaves the others standing
            case.save(force_insert=True)
        return True
    except (DataError, IntegrityError):
        return False


def score_set(caller, *, knowledge_id: str, score: int) -> datetime:
    """Set the item's score (returns the new `updated_at`); PermissionDenied unless `caller` may write one of
    its scopes."""
    from knowledge.services import require_write_any

    item = Knowledge.objects.filter(pk=knowledge_id).only("id", "scopes").first()
    if item is None:
        raise Knowledge.DoesNotExist(knowledge_id)
    require_write_any(caller, item)
    now = timezone.now()
    Knowledge.objects.filter(pk=knowledge_id).update(score=score, updated_at=now)
    return now
