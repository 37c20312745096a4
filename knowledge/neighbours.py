"""The candidate step shared by slim and conflict detection: an item's close items, to be judged.

(A first cut: vector neighbours only, slim's threshold. The measured version, with keyword neighbours and
thresholds per script pairing, replaces it: see BENCHMARKS.md.)
"""
from dataclasses import dataclass

from knowledge.models import Knowledge
from knowledge.search.embeddings import get_embedder
from knowledge.search.vector import vector_candidates

NEIGHBOURS = 5
CANDIDATE_THRESHOLD = 0.75
DUPLICATE_THRESHOLD = 0.88


@dataclass(frozen=True)
class ClosePair:
    other_id: str
    similarity: float
    keyword: float
    cross_script: bool
    duplicate_likely: bool


def close_pairs(item: Knowledge, candidates, *, limit: int = NEIGHBOURS) -> list[ClosePair]:
    """Items of `candidates` close enough to `item` to be judged, closest first."""
    if item.embedding is None:
        return []
    embedder = get_embedder()
    found = vector_candidates(candidates.exclude(pk=item.pk), vector=item.embedding, model_name=embedder.name,
                              dimensions=embedder.dimensions, limit=limit)
    scripts = dict(Knowledge.objects.filter(pk__in=[i for i, _ in found]).values_list("id", "script"))
    return [ClosePair(other_id=i, similarity=s, keyword=0.0, cross_script=scripts.get(i) != item.script,
                      duplicate_likely=s >= DUPLICATE_THRESHOLD)
            for i, s in found if s >= CANDIDATE_THRESHOLD]
