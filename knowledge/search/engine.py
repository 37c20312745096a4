"""Two-stage knowledge search: hybrid retrieval, then the quality rerank.

Stage 1 takes the best `pool` items by keyword rank and by vector similarity
within what the caller may see and asked for, and fuses the two lists with
RRF. The best 2*top_k fused candidates go to stage 2 (rerank.py).

Visibility is applied here, first, and AND-ed with every other filter, so no
filter, type or scope argument can widen what a caller sees.
"""
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.core.exceptions import EmptyResultSet
from django.db.models import QuerySet
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy

from core.metrics import SEARCH_STAGE_SECONDS, timed
from knowledge.models import Knowledge
from knowledge import llm
from knowledge.search import filters as filter_exprs
from knowledge.search import lanes
from knowledge.search import routing
from knowledge.search import embeddings
from knowledge.search.embeddings import EmbedderError, embed_query_cached, get_embedder
from knowledge.search.fusion import RRF_K, convex_combination, keyword_boost, reciprocal_rank_fusion, softmax_fusion
from knowledge.search.crosslingual import calibrated_vector_candidates
from knowledge.search.keyword import keyword_candidates
from knowledge.search.rerank import QUALITY_WEIGHT, Candidate, Gate, quality_rerank
from knowledge.search.relevance import ANSWER_POOL, Evidence, answerable, probability
from knowledge.search.text import script_of
from knowledge.search.vector import cosine_columns, cosines_of

MODES = ("hybrid", "vector", "keyword")
# The calibrated relevance was fitted on lists of 100: z-scores and fused shares are taken over each retriever's best
# POOL, whatever top_k, so a query's relevances do not change with the number of results asked for. A top_k above
# POOL/2 makes the lists 2*top_k long; what only their rest found follows the fusion of their best POOL. (Lists of
# 10*top_k, as before, spread each list's softmax mass over up to 1,000 items at top_k 100: every share shrank, and
# the curation list's text search, at top_k 100, gated as "nothing here" queries that an agent's search answered.)
POOL = 100
FUSIONS = ("softmax", "boost", "convex", "rrf")
# Chosen with bench/retrieval.py; the measurements are in BENCHMARKS.md.
DEFAULT_FUSION = "softmax"
FUSION_WEIGHTS = {
    "softmax": {"vector": 0.9, "keyword": 0.1},
    "boost": {"keyword": 25.0},
    "convex": {"vector": 1.0, "keyword": 1.0},
    "rrf": {"vector": 1.0, "keyword": 1.0},
}
KEYWORD_BOOST_DECAY = 2.0
# Softmax temperatures: vector scores are z-scores, keyword scores BM25 shares (0..1).
SOFTMAX_TEMPERATURES = {"vector": 1.4, "keyword": 0.015}
# Keyword scores are already a share of the query's best possible BM25 (0..1);
# vector similarities are min-max normalised within their own list.
SCORE_FLOORS = {"keyword": 0.0}
SCORE_CEILINGS = {"keyword": 1.0}


@dataclass
class SearchResult:
    hits: list[Candidate]
    candidates: list[Candidate] = field(default_factory=list)  # stage 1, fused order
    items: dict[str, Knowledge] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # lazy: read in the language of whoever shows them
    answerable: float | None = None  # P(some candidate answers the query), relevance.answerable; None for a listing
    # A fallback answered (the embedder failed: keywords only; the LLM router failed: the fused order). Such a
    # run says nothing about what a healthy one returns, so the result cache (result_cache.py) never keeps it.
    degraded: bool = False

    def ordered_items(self) -> list[Knowledge]:
        return [self.items[hit.id] for hit in self.hits]


def _keyword_stage(base: QuerySet[Knowledge], query: str, pool: int, statistics: QuerySet[Knowledge]) -> list[tuple[str, float]]:
    with timed(SEARCH_STAGE_SECONDS, stage="keyword"):
        return keyword_candidates(base, text=query, limit=pool, statistics=statistics)


def visible(*, readable_scopes: Iterable[str] | None) -> QuerySet[Knowledge]:
    """Items whose scopes meet the caller's; None means every scope (curators)."""
    return Knowledge.objects.readable_with(readable_scopes)


def narrowed(
    queryset: QuerySet[Knowledge],
    *,
    types: Sequence[str] | None = None,
    scopes: Sequence[str] | None = None,
    tags: dict[str, str] | None = None,
    statuses: Sequence[str] = ("active",),
    filters=None,
) -> QuerySet[Knowledge]:
    if statuses:
        queryset = queryset.filter(status__in=list(statuses))
    if types:
        queryset = queryset.filter(types__overlap=list(types))
    if scopes:
        queryset = queryset.filter(scopes__overlap=list(scopes))
    for key, value in (tags or {}).items():
        queryset = queryset.filter(tags__contains={key: value})
    if filters:
        queryset = filter_exprs.apply_filter(queryset, filters)
    return queryset


def search(
    *,
    query: str,
    top_k: int = 5,
    min_score: int = 3,
    types: Sequence[str] | None = None,
    scopes: Sequence[str] | None = None,
    tags: dict[str, str] | None = None,
    filters=None,
    readable_scopes: Iterable[str] | None = None,
    statuses: Sequence[str] = ("active",),
    rank: str = "quality",
    mode: str = "hybrid",
    fusion: str = DEFAULT_FUSION,
    rrf_k: int = RRF_K,
    weights: dict[str, float] | None = None,
    embedder_name: str | None = None,
    gate: Gate | None = None,
    quality_weight: float | None = None,
) -> SearchResult:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    if fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}")
    readable = visible(readable_scopes=readable_scopes)
    base = narrowed(readable, types=types, scopes=scopes, tags=tags, statuses=statuses, filters=filters)
    pool = max(POOL, 2 * top_k)
    notes: list[str] = []
    lists: dict[str, list[tuple[str, float]]] = {}

    embedder = query_vector = embedding = None
    degraded = False
    if query.strip() and mode in ("hybrid", "vector"):
        try:
            embedder = get_embedder(embedder_name)
        except EmbedderError as exc:
            degraded = True
            notes.append(_vector_search_unavailable(exc))
        if embedder is not None and mode == "hybrid":  # computed while the keyword stage runs
            embedding = embeddings.soon(_query_vector, embedder, query)
    keyword = None
    try:
        if query.strip() and mode in ("hybrid", "keyword"):
            statistics = narrowed(readable, statuses=statuses)  # how rare a word is, whatever the filters
            # on a lane of its own while the query is embedded and the vector walks run (lanes.py)
            keyword = lanes.soon(_keyword_stage, base, query, pool, statistics)
            if embedder is None:
                lists["keyword"] = keyword()
        if embedder is not None:
            try:
                if embedding is not None:
                    with timed(SEARCH_STAGE_SECONDS, stage="embedding_wait"):  # what is left of it after the keyword stage
                        query_vector = embedding()
                else:  # a vector-only search: nothing to run beside it
                    query_vector = _query_vector(embedder, query)
                with timed(SEARCH_STAGE_SECONDS, stage="vector"):
                    lists["vector"] = calibrated_vector_candidates(
                        base, query=query, query_vector=query_vector, embedder=embedder, limit=pool
                    )
            except EmbedderError as exc:
                embedder = query_vector = None  # built, but it could not embed (its model service is down): keywords only
                degraded = True
                notes.append(_vector_search_unavailable(exc))
            if keyword is not None:
                lists["keyword"] = keyword()
    except EmptyResultSet:  # the filters can match nothing (`IN []`, an empty OR): no candidates, not an error
        for started in (embedding, keyword):
            if started is not None:
                started.cancel()  # nor is the query's vector, or the keywords' list, needed
        lists, embedder, query_vector = {}, None, None
    heads = {name: rows[:POOL] for name, rows in lists.items()}
    if not query.strip():
        fused = [(item_id, 0.0) for item_id in base.order_by("-created_at").values_list("id", flat=True)[:pool]]
    else:
        # Fused over each list's best POOL: the lists the relevance was fitted on, whatever top_k.
        fused = _fuse(heads, fusion=fusion, rrf_k=rrf_k, weights=weights)
    fused_total = sum(score for _, score in fused) or 1.0  # the lists' whole mass, before the cut
    if query.strip() and pool > POOL:  # 2*top_k above POOL: what only the rest of the lists found follows
        seen = {item_id for item_id, _ in fused}
        fused += [row for row in _fuse(lists, fusion=fusion, rrf_k=rrf_k, weights=weights) if row[0] not in seen]
    routed = False
    if query.strip() and routing.routing_enabled():
        fused, routed = _route(query, fused, base, top_k=top_k, notes=notes)
        degraded = degraded or not routed  # the LLM failed: the fused order stood in for its choice
    if routed:
        fused_total = sum(score for _, score in fused) or 1.0
    # Whether the query has an answer here is judged on its best ANSWER_POOL candidates whatever top_k is (the model
    # was fitted on them), so a relevance does not change with the number of results asked for; the rows read are
    # those and the 2*top_k candidates.
    judged = fused[: max(2 * top_k, ANSWER_POOL)] if not routed else fused[: 2 * top_k]

    stage_two_started = time.perf_counter()  # the rerank stage: evidence, relevance, the gate and quality
    # The rows are read through the caller's base, as stage 1 was: an item edited meanwhile out of what the caller
    # may read or asked for (moved to another scope, archived, merged away) is left out, never returned as it now is.
    # The vectors and keyword documents stay in the database: it gives stage 2 their cosines with the query.
    rows = base.defer("embedding", "search_document")
    if embedder is not None:
        rows = rows.annotate(**cosine_columns(embedder, query_vector))
    items = rows.in_bulk([item_id for item_id, _ in judged])
    if len(items) < len(judged):
        judged = [row for row in judged if row[0] in items]
        fused = [row for row in fused[: max(2 * top_k, ANSWER_POOL)] if row[0] in items]
    fused = fused[: 2 * top_k]
    ranks = _ranks(lists)
    # the evidence is what a list of POOL holds (the relevance was fitted on them): beyond a list's POOL best, an item
    # is absent from it, as it would be at top_k 10
    evidence = _evidence(query, judged, fused_total, items, _ranks(heads), embedder=embedder)
    chance = None
    if routed:  # seed 003: the router judged which candidates answer, in order; its order is the relevance (1 → 0.5)
        relevances = {item_id: 1.0 - 0.5 * position / len(fused) for position, (item_id, _) in enumerate(fused)}
    else:  # P(the query has an answer here) × P(this candidate is one, given that)
        model = embedder.name if embedder else ""
        ranked_by_vector = len(lists["vector"]) if "vector" in lists else None
        pooled = [evidence[item_id] for item_id, _ in judged[:ANSWER_POOL]]  # the ANSWER_POOL the model was fitted on
        chance = answerable([e for e in pooled if e], model, field=ranked_by_vector) if query.strip() else None
        relevances = {item_id: _relevance(evidence[item_id], chance, model) for item_id, _ in fused}
    candidates = []
    for item_id, fused_score in fused:
        item = items[item_id]
        explanation = {"relevance": round(relevances[item_id], 4), "fused_score": round(fused_score, 6)}
        if chance is not None:
            explanation["answerable"] = round(chance, 4)
        for name, by_id in ranks.items():
            position, raw = by_id.get(item_id, (None, None))
            explanation[f"{name}_rank"] = position
            # vector scores are z-scores within the item's writing system; keyword scores BM25 shares
            explanation[f"{name}_{'z' if name == 'vector' else 'share'}"] = None if raw is None else round(raw, 6)
        candidates.append(Candidate(
            id=item_id, relevance=relevances[item_id], fused=fused_score, score=item.score, helpful=item.helpful,
            harmful=item.harmful, explanation=explanation, evidence=evidence[item_id],
        ))
    if routed and gate is None:
        gate = Gate(answer=0.0, floor=0.0, relative=0.0)  # the LLM router already kept only answers (seed 003)
    hits = quality_rerank(candidates, top_k=top_k, min_score=min_score, rank=rank, gate=gate or Gate(),
                          quality_weight=QUALITY_WEIGHT if quality_weight is None else quality_weight)
    SEARCH_STAGE_SECONDS.labels(stage="rerank").observe(time.perf_counter() - stage_two_started)
    for candidate in candidates:
        candidate.explanation["quality_score"] = candidate.quality_score
        candidate.explanation["gate"] = candidate.gate or None
        candidate.explanation["gate_code"] = candidate.gate_code or None
    return SearchResult(hits=hits, candidates=candidates, items={i: items[i] for i, _ in fused}, notes=notes, answerable=chance,
                        degraded=degraded)


def _ranks(lists: dict[str, list[tuple[str, float]]]) -> dict[str, dict[str, tuple[int, float]]]:
    """list name -> item id -> (its position, from 1, and its score)"""
    return {name: {item_id: (i, score) for i, (item_id, score) in enumerate(rows, start=1)} for name, rows in lists.items()}


def _fuse(lists: dict[str, list[tuple[str, float]]], *, fusion: str, rrf_k: int, weights) -> list[tuple[str, float]]:
    if fusion == "rrf":
        return reciprocal_rank_fusion(
            {name: [item_id for item_id, _ in rows] for name, rows in lists.items()},
            k=rrf_k,
            weights=weights or FUSION_WEIGHTS["rrf"],
        )
    if fusion == "softmax":
        return softmax_fusion(lists, weights=weights or FUSION_WEIGHTS["softmax"], temperatures=SOFTMAX_TEMPERATURES)
    if fusion == "convex":
        return convex_combination(lists, weights=weights or FUSION_WEIGHTS["convex"], floors=SCORE_FLOORS, ceilings=SCORE_CEILINGS)
    return keyword_boost(
        lists.get("vector", []), lists.get("keyword", []),
        weight=(weights or FUSION_WEIGHTS["boost"])["keyword"], decay=KEYWORD_BOOST_DECAY,
    )


def _query_vector(embedder, query: str):
    """The query's vector (from the per-process cache when asked before), its time the `embedding` stage's."""
    with timed(SEARCH_STAGE_SECONDS, stage="embedding"):
        return embed_query_cached(embedder, query)


def _vector_search_unavailable(error: Exception):
    return format_lazy(gettext_lazy("vector search unavailable ({error}); keyword results only"), error=error)


def _relevance(evidence: Evidence | None, chance: float | None, model: str) -> float:
    """chance × the candidate's own probability; an item whose vector is pending is judged on its keywords alone
    (the chance comes from the others' vectors: it says nothing about it)."""
    if evidence is None:
        return 1.0  # a listing, no query
    own = probability(evidence, model)
    return own if chance is None or evidence.e5 is None else chance * own


def _evidence(query, fused, total, items, ranks, *, embedder) -> dict[str, Evidence | None]:
    """item id -> what relevance.py weighs for each fused candidate (None without a query: a listing)."""
    if not query.strip():
        return {item_id: None for item_id, _ in fused}
    best = max((score for _, score in fused), default=0.0)
    own_script = script_of(query)
    evidence = {}
    for item_id, score in fused:
        _, share = ranks.get("keyword", {}).get(item_id, (None, 0.0))
        _, z = ranks.get("vector", {}).get(item_id, (None, None))
        e5, use = cosines_of(items[item_id], embedder) if embedder is not None else (None, None)
        evidence[item_id] = Evidence(
            e5=e5, use=use, same_script=not items[item_id].script or not own_script or items[item_id].script == own_script,
            keyword_share=share or 0.0, vector_z=z if z is not None else -3.0,
            fused_share=score / total if best > 0 else 0.0,
            fused_ratio=score / best if best > 0 else 0.0,
        )
    return evidence


def _route(query: str, fused: list[tuple[str, float]], base: QuerySet[Knowledge], *, top_k: int,
           notes: list[str]) -> tuple[list[tuple[str, float]], bool]:
    """Let the LLM choose 2*top_k of the wider pool (read through the caller's `base`, as stage 1 was); its order
    becomes the fused order. (fused, whether it chose.)"""
    pool = fused[: routing.ROUTING_POOL_PER_RESULT * top_k]
    texts = dict((row[0], row[1:]) for row in base.filter(pk__in=[i for i, _ in pool]).values_list("id", "task", "content"))
    try:
        chosen = routing.route(query=query, candidates=[(i, *texts[i]) for i, _ in pool if i in texts], pick=2 * top_k)
    except llm.LLMError as exc:
        notes.append(format_lazy(gettext_lazy("LLM routing unavailable ({error}); fused order used"), error=exc))
        return fused, False
    notes.append(format_lazy(gettext_lazy("LLM routing chose {chosen} of {pool} candidates"), chosen=len(chosen), pool=len(pool)))
    return [(item_id, 1.0 / (1 + position)) for position, item_id in enumerate(chosen)], True
