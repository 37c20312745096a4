"""Fusing the keyword and vector candidate lists: softmax (the default), boost, convex, RRF."""
import math
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


def convex_combination(
    scored_lists: Mapping[str, Sequence[tuple[str, float]]],
    *,
    weights: Mapping[str, float],
    floors: Mapping[str, float] | None = None,
    ceilings: Mapping[str, float] | None = None,
) -> list[tuple[str, float]]:
    """Fuse by score: sum of weight * normalised score, a missing score counting 0.

    Each list's scores are min-max normalised, using a theoretical floor or
    ceiling where the retriever has one (`floors`, `ceilings`) and the list's
    own minimum or maximum otherwise, so one retriever's confident match is
    not flattened to the same 1/(k+rank) as a weak one (Bruch et al., 2023).
    """
    floors = floors or {}
    ceilings = ceilings or {}
    scores: dict[str, float] = {}
    for name, rows in scored_lists.items():
        if not rows:
            continue
        values = [score for _, score in rows]
        low = floors.get(name, min(values))
        high = ceilings.get(name, max(values))
        span = high - low
        weight = weights.get(name, 1.0)
        for item_id, score in rows:
            normalised = (score - low) / span if span > 0 else 1.0
            scores[item_id] = scores.get(item_id, 0.0) + weight * normalised
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def keyword_boost(
    vector_rows: Sequence[tuple[str, float]],
    keyword_rows: Sequence[tuple[str, float]],
    *,
    weight: float,
    decay: float,
) -> list[tuple[str, float]]:
    """Vector order, lifted by strong keyword matches near the top of the keyword list.

    score = vector similarity min-max normalised within its list (0..1, 0 if
    absent) + weight * keyword share / keyword_rank ** decay, where the
    keyword share is BM25 over the query's best possible BM25 (0..1).

    Why this shape (BENCHMARKS.md): a sum of normalised scores must pick one
    keyword weight for everything, and no single weight served both a
    monolingual set where keyword search is near perfect (CMRC 2018: the
    keyword weight must be high) and a cross-lingual one where the keyword
    list is mostly same-language near-misses (XQuAD-R: it must be low).
    Discounting by rank squared keeps the keyword list's confident top
    matches and drops its tail, which serves both.
    """
    vector = dict(convex_combination({"vector": vector_rows}, weights={"vector": 1.0})) if vector_rows else {}
    scores = dict(vector)
    for rank, (item_id, share) in enumerate(keyword_rows, start=1):
        scores[item_id] = scores.get(item_id, 0.0) + weight * share / rank**decay
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def softmax_fusion(
    scored_lists: Mapping[str, Sequence[tuple[str, float]]],
    *,
    weights: Mapping[str, float],
    temperatures: Mapping[str, float],
) -> list[tuple[str, float]]:
    """Each list becomes a probability over its candidates; the fused score is their weighted sum.

    p(item | list) = softmax(score / temperature) over the list's candidates,
    fused = sum over lists of weight * p (0 where a list lacks the item).

    Why (BENCHMARKS.md): a list that is sure of its top match (a keyword hit
    far ahead of the next, a vector z-score far above its neighbours) puts
    most of its mass there, and a list that is unsure spreads it thin, so
    each retriever weighs in per query by its own confidence. That serves
    both a monolingual set where keyword search is near perfect (CMRC 2018)
    and a cross-lingual one where the keyword list only ever finds the
    same-language half (XQuAD-R), which no fixed score weight did.
    Vector scores are z-scores (crosslingual.py); keyword scores are BM25
    shares of the query's best possible score (0..1), hence the very
    different temperatures.
    """
    fused: dict[str, float] = {}
    for name, rows in scored_lists.items():
        if not rows:
            continue
        temperature = temperatures[name]
        top = max(score for _, score in rows)
        mass = [(item_id, math.exp((score - top) / temperature)) for item_id, score in rows]
        total = sum(m for _, m in mass)
        weight = weights.get(name, 1.0)
        for item_id, m in mass:
            fused[item_id] = fused.get(item_id, 0.0) + weight * m / total
    return sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))
