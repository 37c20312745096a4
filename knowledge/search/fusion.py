"""Reciprocal rank fusion of the keyword and vector candidate lists."""
from collections.abc import Mapping, Sequence

RRF_K = 60


def reciprocal_rank_fusion(
    ranked_lists: Mapping[str, Sequence[str]], *, k: int = RRF_K, weights: Mapping[str, float] | None = None
) -> list[tuple[str, float]]:
    """Fuse ranked id lists: score(id) = sum over lists of weight / (k + rank), rank from 1.

    Returns (id, score) best first; ties broken by id so results are stable.
    """
    weights = weights or {}
    scores: dict[str, float] = {}
    for name, ids in ranked_lists.items():
        weight = weights.get(name, 1.0)
        for rank, item_id in enumerate(ids, start=1):
            scores[item_id] = scores.get(item_id, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))
