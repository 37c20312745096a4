"""Reads of knowledge."""
from django.db.models import Count, Prefetch, QuerySet

from core.newest import Newest, newest
from knowledge.models import FeedbackCase, Knowledge, KnowledgeResource, KnowledgeVersion

# What a page about items never shows: the vector and the keyword document (large, and parsed per row).
UNSHOWN = ("embedding", "search_document")


def knowledge_with_relations() -> QuerySet[Knowledge]:
    """Items with everything the seed's JSON shape needs, in four extra queries."""
    return Knowledge.objects.prefetch_related(
        Prefetch("resource_links", queryset=KnowledgeResource.objects.order_by("position")),
        Prefetch("feedback_cases", queryset=FeedbackCase.objects.order_by("id")),
        Prefetch("supersedes", queryset=Knowledge.objects.only("id", "superseded_by")),
    )


def knowledge_get(*, knowledge_id: str) -> Knowledge:
    """Raises Knowledge.DoesNotExist."""
    return knowledge_with_relations().get(pk=knowledge_id)


def knowledge_get_shown(*, knowledge_id: str) -> Knowledge:
    """The item as a page shows it: its own fields, without its histories, vector or keyword document.
    Raises Knowledge.DoesNotExist."""
    return Knowledge.objects.defer(*UNSHOWN).get(pk=knowledge_id)


def feedback_newest(*, knowledge_id: str, per_kind: int) -> dict[str, Newest]:
    """The newest `per_kind` helpful and harmful reports on an item, newest first, with each kind's total, however
    long the histories: each kind's newest read backwards from the feedback_by_item index (one UNION query), the
    totals counted from that index alone (one more)."""
    cases = FeedbackCase.objects.filter(knowledge_id=knowledge_id)
    newest_of = [cases.filter(kind=kind).order_by("-id")[:per_kind] for kind in FeedbackCase.Kind.values]
    totals = dict(cases.values_list("kind").annotate(n=Count("id")).order_by())
    found = {kind: Newest(rows=[], total=totals.get(kind, 0)) for kind in FeedbackCase.Kind.values}
    for case in sorted(newest_of[0].union(*newest_of[1:], all=True), key=lambda c: -c.id):
        found[case.kind].rows.append(case)
    return found


def versions_newest(*, knowledge_id: str, limit: int | None) -> Newest:
    """An item's newest `limit` versions (all of them for None), newest first, with the total: one query."""
    return newest(KnowledgeVersion.objects.filter(knowledge_id=knowledge_id), order_by="-number", limit=limit)
