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
    """The case as stored: the reporter's text, with who reported it (the caller) and when (the server's clock).
    Both are always set here, whatever the case sent: an agent's case naming another reporter or an earlier time
    would be shown in the item's history as that reporter's, at that time. (Restores and imports keep an export's
    cases as they were: they build theirs without this.)"""
    case = dict(case or {})
    case["timestamp"] = timezone.now().isoformat().replace("+00:00", "Z")
    if reported_by:
        case["reported_by"] = reported_by
    else:
        case.pop("reported_by", None)
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


def feedback_event(case: FeedbackCase, scopes: list[str], *, forwarded_from: str | None = None) -> events.Event:
    # the case itself is the reporter's free text: the event names the item and the verdict only
    data = {"knowledge_id": case.knowledge_id, "kind": case.kind, "reported_by": case.reported_by,
            "search_id": None if case.search_id is None else str(case.search_id)}
    if forwarded_from:  # a report on `forwarded_from`, merged into this item: not a second report
        data["forwarded_from"] = forwarded_from
    return events.event_new(events.FEEDBACK_RECEIVED, scopes=scopes, data=data)


@transaction.atomic(savepoint=False)  # all or nothing; inside a caller's transaction, no savepoint of its own
def feedback_record(caller, *, knowledge_id: str, helpful: bool, case: dict | None = None,
                    search_id=None) -> tuple[FeedbackCase, Tally]:
    """`caller` reports whether the item helped (recorded as the case's reporter): the stored case and the
    item's counters after it. Raises Knowledge.DoesNotExist when there is no such item.

    `search_id` names the logged search the item was found in (checked visible by the caller).
    """
    stored = insert_row(case_new(caller, knowledge_id=knowledge_id, helpful=helpful, case=case, search_id=search_id))
    tally = counters_add(knowledge_id=knowledge_id, **{stored.kind: 1})
    events.emit_all([feedback_event(stored, tally.scopes), *_forward([stored], {knowledge_id: tally})])
    return stored, tally


MERGES_FOLLOWED = 10  # an item merged into one merged in turn...: how far a report follows


def _forward(cases: list[FeedbackCase], tallies: dict[str, Tally]) -> list[events.Event]:
    """Reports on items merged away count for the items they became too, as the merge counted the reports before
    it (their cases copied, the counters summed): the agent found the original before the merge, and its verdict
    is about the text the merged item now holds. The original keeps its own (unmerging gives it back as it was).
    A copy carries no `search_id`: the search returned the original, and its judgment is the original's (the
    merge's copies carry none either). The counters' UPDATE waited for a merge's lock on the original's row, so a
    report arriving while a merge commits is counted by the merge or here, never lost, never twice.

    The merged items are locked after every original, in id order, one INSERT and one UPDATE each. (A merged item
    whose id sorts before its original's, unmerged at that very moment, can still collide with this: PostgreSQL
    then rolls one back and the API answers 503 write_conflict, retried.) Returns the copies' events."""
    events_: list[events.Event] = []
    for _ in range(MERGES_FOLLOWED):
        onward = [(case, tallies[case.knowledge_id].merged_into) for case in cases
                  if tallies[case.knowledge_id].merged_into is not None]
        if not onward:
            break
        copies = [(FeedbackCase(knowledge_id=target, kind=case.kind, reported_by=case.reported_by, case=case.case),
                   case.knowledge_id) for case, target in sorted(onward, key=lambda pair: pair[1])]
        FeedbackCase.objects.bulk_create([copy for copy, _ in copies])
        tallies = _counted([copy for copy, _ in copies])
        events_ += [feedback_event(copy, tallies[copy.knowledge_id].scopes, forwarded_from=original)
                    for copy, original in copies]
        cases = [copy for copy, _ in copies]
    return events_


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
    in_id_order = sorted(cases, key=lambda case: case.knowledge_id)  # each insert share-locks its item (foreign key)
    try:
        with transaction.atomic():
            FeedbackCase.objects.bulk_create(in_id_order)
        landed = {id(case) for case in cases}
    except (DataError, IntegrityError):
        landed = {id(case) for case in in_id_order if _stored_alone(case)}
    stored = [case for case in cases if id(case) in landed]
    tallies = _counted(stored)
    events.emit_all([feedback_event(case, tallies[case.knowledge_id].scopes) for case in stored]
                    + _forward(stored, tallies))
    return [id(case) in landed for case in cases]


def _counted(cases: list[FeedbackCase]) -> dict[str, Tally]:
    """Each item's counters moved by its stored `cases` in one UPDATE, items in id order (the order every writer of
    several items locks them in): item id -> its tally."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for case in cases:
        counts[case.knowledge_id][case.kind] += 1
    return {knowledge_id: counters_add(knowledge_id=knowledge_id, **counts[knowledge_id]) for knowledge_id in sorted(counts)}


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
