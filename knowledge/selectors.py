"""Reads of knowledge."""
import threading

from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import OuterRef, Prefetch, QuerySet

from knowledge.models import FeedbackCase, Knowledge, KnowledgeResource

# Never part of a reply: the vector (thousands of bytes to decode) and the keyword document.
UNSHOWN_FIELDS = ("embedding", "search_document")


def knowledge_with_relations() -> QuerySet[Knowledge]:
    """Items with everything the seed's JSON shape needs, in four extra queries."""
    return Knowledge.objects.defer(*UNSHOWN_FIELDS).prefetch_related(
        Prefetch("resource_links", queryset=KnowledgeResource.objects.order_by("position")),
        Prefetch("feedback_cases", queryset=FeedbackCase.objects.order_by("id")),
        Prefetch("supersedes", queryset=Knowledge.objects.only("id", "superseded_by")),
    )


def knowledge_get(*, knowledge_id: str) -> Knowledge:
    """Raises Knowledge.DoesNotExist."""
    return knowledge_with_relations().get(pk=knowledge_id)


def _newest_cases(kind: str, limit: int) -> ArraySubquery:
    # Read backwards along the index `feedback_by_item` (knowledge, kind, id), so that the cost is `limit` rows
    # whatever the history's length. With `kind = …` and ORDER BY id alone, PostgreSQL may walk the primary key
    # backwards instead, through every newer case of every item, when its statistics say few items have cases;
    # `kind` as a range (the same one value) keeps it in the ordering, which only that index provides.
    return ArraySubquery(FeedbackCase.objects.filter(knowledge=OuterRef("pk"), kind__gte=kind, kind__lte=kind)
                         .order_by("-kind", "-id").values("case")[:limit])


def knowledge_with_recent_cases(*, limit: int) -> QuerySet[Knowledge]:
    """Items with what the seed's shape needs, in one query whatever the length of their histories:
    `linked_resource_ids` and `supersedes_ids` (lists of ids), and `recent_helpful` / `recent_harmful`
    (each history's newest `limit` cases, newest first)."""
    # Building this queryset costs a feedback request as much CPU as compiling it (0.9 ms), so a thread builds it
    # once and hands out copies (the one built is never evaluated, so it caches no rows). Per thread, because the
    # copies share its expressions, which compiling may touch. A threaded WSGI worker keeps its threads; under
    # ASGI each request's sync code runs in a thread of its own, which builds it once for that request.
    built = _built.__dict__.setdefault("recent_cases", {})
    if limit not in built:
        built[limit] = Knowledge.objects.defer(*UNSHOWN_FIELDS).annotate(
            linked_resource_ids=ArraySubquery(KnowledgeResource.objects.filter(knowledge=OuterRef("pk"))
                                              .order_by("position").values("resource_id")),
            supersedes_ids=ArraySubquery(Knowledge.objects.filter(superseded_by=OuterRef("pk")).order_by("id")
                                         .values("id")),
            recent_helpful=_newest_cases(FeedbackCase.Kind.HELPFUL, limit),
            recent_harmful=_newest_cases(FeedbackCase.Kind.HARMFUL, limit),
        )
    return built[limit].all()


_built = threading.local()
