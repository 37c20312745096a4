"""The knowledge list's query: the real search engine for text, its filters for everything else."""
from dataclasses import dataclass

from django.db.models import QuerySet

from knowledge.models import Knowledge
from knowledge.quality import QUALITY
from knowledge.search import engine
from knowledge.search.filters import AND, EQ, GTE, LTE
from knowledge.selectors import UNSHOWN

# With a query, this many best hits (2x as stage-1 candidates) are browsable.
SEARCH_TOP_K = 100
# Quality and helpfulness are read from each item's Standing (its copy of them, indexed in these orders): sorting the
# items' own columns read every visible item (96 ms at 100k items).
ORDERINGS = {
    "quality": ("-standing__quality", "-standing__created_at", "id"),
    "newest": ("-created_at", "id"),
    "helpful": ("-standing__helpful", "-standing__created_at", "id"),
    "harmful": ("-harmful", "-created_at", "id"),
}


@dataclass
class Browse:
    items: list | QuerySet
    searched: bool
    notes: list[str]


def with_quality(queryset: QuerySet) -> QuerySet:
    return queryset.annotate(quality=QUALITY)


def _extra_filters(*, owner: str, score_min: int | None, score_max: int | None):
    conditions = []
    if owner:
        conditions.append(EQ("owner", owner))
    if score_min:
        conditions.append(GTE("score", score_min))
    if score_max:
        conditions.append(LTE("score", score_max))
    return AND(*conditions) if conditions else None


def knowledge_browse(*, q: str = "", types=(), scopes=(), tags=None, owner: str = "", status: str = "active",
                     score_min: int | None = None, score_max: int | None = None, sort: str = "") -> Browse:
    """Items matching the filters; with `q`, the engine's stage-1 candidates that pass its relevance
    gate (low-quality ones too: a curator must see them), in relevance order unless another `sort` is asked for."""
    statuses = () if status == "any" else (status or "active",)
    filters = _extra_filters(owner=owner, score_min=score_min, score_max=score_max)
    if q.strip():
        result = engine.search(query=q, top_k=SEARCH_TOP_K, min_score=1, types=types or None, scopes=scopes or None,
                               tags=tags or None, filters=filters, statuses=statuses, rank="relevance")
        answers = [c for c in result.candidates if c.answers]  # a curator sees low quality, not non-answers
        items = [result.items[c.id] for c in answers]
        for item, candidate in zip(items, answers):
            item.quality = item.quality_score
            item.relevance = candidate.relevance
        if sort in ORDERINGS:
            key = {"quality": lambda k: -k.quality, "newest": lambda k: -k.created_at.timestamp(),
                   "helpful": lambda k: -k.helpful, "harmful": lambda k: -k.harmful}[sort]
            items.sort(key=key)
        return Browse(items=items, searched=True, notes=result.notes)
    queryset = engine.narrowed(Knowledge.objects.defer(*UNSHOWN), types=types or None, scopes=scopes or None,
                               tags=tags or None, statuses=statuses, filters=filters)
    ordering = ORDERINGS.get(sort, ORDERINGS["newest"])
    if ordering[0].startswith("-standing__"):  # joined, not outer-joined: the standing's index then gives the order
        queryset = queryset.filter(standing__isnull=False)
    return Browse(items=with_quality(queryset.order_by(*ordering)), searched=False, notes=[])


