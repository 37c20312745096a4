"""Reads of knowledge."""
import threading
import time

from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import Count, F, Func, OuterRef, Prefetch, QuerySet

from core.compiled import CompiledRead
from core.newest import Newest, newest
from knowledge.models import FeedbackCase, Knowledge, KnowledgeResource, KnowledgeVersion

# What a page about items never shows: the vector and the keyword document (large, and parsed per row).
UNSHOWN = ("embedding", "search_document")
SCOPES_KEPT_SECONDS = 60
_scopes: tuple[float, list[str]] = (0.0, [])  # (until when, the scopes)


def known_scopes() -> list[str]:
    """Every scope some item is in, sorted: the scope fields' suggestions. No index lists an array column's
    values, so reading them is a pass over the whole table; a process keeps them SCOPES_KEPT_SECONDS (a new
    scope is suggested within a minute; filtering by it works at once)."""
    global _scopes
    now = time.monotonic()
    if _scopes[0] <= now:
        rows = Knowledge.objects.annotate(scope=Func(F("scopes"), function="unnest")).values_list("scope", flat=True)
        _scopes = (now + SCOPES_KEPT_SECONDS, sorted(rows.order_by().distinct()))
    return _scopes[1]


def knowledge_with_relations() -> QuerySet[Knowledge]:
    """Items with everything the seed's JSON shape needs, in four extra queries."""
    return Knowledge.objects.defer(*UNSHOWN).prefetch_related(
        Prefetch("resource_links", queryset=KnowledgeResource.objects.order_by("position")),
        Prefetch("feedback_cases", queryset=FeedbackCase.objects.order_by("id")),
        Prefetch("supersedes", queryset=Knowledge.objects.only("id", "superseded_by")),
    )


def knowledge_get(*, knowledge_id: str) -> Knowledge:
    """The item with its links and whole histories, in one query (`knowledge_visible`). Raises
    Knowledge.DoesNotExist."""
    item = knowledge_visible(knowledge_id=knowledge_id, readable_scopes=None, cases=None)
    if item is None:
        raise Knowledge.DoesNotExist(knowledge_id)
    return item


def knowledge_get_shown(*, knowledge_id: str) -> Knowledge:
    """The item as a page shows it: its own fields, without its histories, vector or keyword document.
    Raises Knowledge.DoesNotExist."""
    return Knowledge.objects.defer(*UNSHOWN).get(pk=knowledge_id)


def feedback_newest(*, knowledge_id: str, per_kind: int) -> dict[str, Newest]:
    """The newest `per_kind` helpful and harmful reports on an item, newest first, with each kind's total, however
    long the histories: each kind's newest read backwards from the feedback_by_item index (one UNION query), the
    totals counted from that index alone (one more)."""
    cases = FeedbackCase.objects.filter(knowledge_id=knowledge_id)
    newest_of = [_newest_first(cases, kind)[:per_kind] for kind in FeedbackCase.Kind.values]
    totals = dict(cases.values_list("kind").annotate(n=Count("id")).order_by())
    found = {kind: Newest(rows=[], total=totals.get(kind, 0)) for kind in FeedbackCase.Kind.values}
    for case in sorted(newest_of[0].union(*newest_of[1:], all=True), key=lambda c: -c.id):
        found[case.kind].rows.append(case)
    return found


def versions_newest(*, knowledge_id: str, limit: int | None) -> Newest:
    """An item's newest `limit` versions (all of them for None), newest first, with the total: one query."""
    return newest(KnowledgeVersion.objects.filter(knowledge_id=knowledge_id), order_by="-number", limit=limit)


def _newest_first(cases: QuerySet[FeedbackCase], kind: str) -> QuerySet[FeedbackCase]:
    """One item's cases of `kind`, newest first, read backwards along the index `feedback_by_item` (knowledge,
    kind, id), so that reading the first n costs n rows whatever the history's length. With `kind = …` and
    ORDER BY id alone, PostgreSQL may walk the primary key backwards instead, through every newer case of every
    item, when its statistics say few items have cases; `kind` as a range (the same one value) keeps it in the
    ordering, which only that index provides."""
    return cases.filter(kind__gte=kind, kind__lte=kind).order_by("-kind", "-id")


def _newest_cases(kind: str, limit: int) -> ArraySubquery:
    return ArraySubquery(_newest_first(FeedbackCase.objects.filter(knowledge=OuterRef("pk")), kind)
                         .values("case")[:limit])


def knowledge_with_recent_cases(*, limit: int | None) -> QuerySet[Knowledge]:
    """Items with what the seed's shape needs, in one query whatever the length of their histories:
    `linked_resource_ids` and `supersedes_ids` (lists of ids), and `recent_helpful` / `recent_harmful`
    (each history's newest `limit` cases, newest first; None: every case)."""
    # Building this queryset costs a feedback request as much CPU as compiling it (0.9 ms), so a thread builds it
    # once and hands out copies (the one built is never evaluated, so it caches no rows). Per thread, because the
    # copies share its expressions, which compiling may touch. A threaded WSGI worker keeps its threads; under
    # ASGI each request's sync code runs in a thread of its own, which builds it once for that request.
    built = _built.__dict__.setdefault("recent_cases", {})
    if limit not in built:
        built[limit] = Knowledge.objects.defer(*UNSHOWN).annotate(
            linked_resource_ids=ArraySubquery(KnowledgeResource.objects.filter(knowledge=OuterRef("pk"))
                                              .order_by("position").values("resource_id")),
            supersedes_ids=ArraySubquery(Knowledge.objects.filter(superseded_by=OuterRef("pk")).order_by("id")
                                         .values("id")),
            recent_helpful=_newest_cases(FeedbackCase.Kind.HELPFUL, limit),
            recent_harmful=_newest_cases(FeedbackCase.Kind.HARMFUL, limit),
        )
    return built[limit].all()


_built = threading.local()


def _visible_with_cases(*, knowledge_id: str, readable_scopes, limit: int | None) -> QuerySet[Knowledge]:
    return knowledge_with_recent_cases(limit=limit).readable_with(readable_scopes).filter(pk=knowledge_id)


_visible_with_cases_read = CompiledRead(_visible_with_cases)


def knowledge_visible(*, knowledge_id: str, readable_scopes, cases: int | None) -> Knowledge | None:
    """The item if it is readable with `readable_scopes` (None: every scope), with its links and each history's
    newest `cases` cases (None: all; `knowledge_with_recent_cases`), in one query whose SQL is compiled once
    (core.compiled: compiling it costs five times what running it does); None when there is no such item.
    `histories_complete` says whether the histories are whole."""
    found = _visible_with_cases_read(knowledge_id=knowledge_id, readable_scopes=readable_scopes, limit=cases)
    if not found:
        return None
    found[0].histories_complete = cases is None
    return found[0]
