"""Stage 1, vector side: pgvector HNSW with cosine distance.

Each embedder has its own partial expression index,
`hnsw ((embedding::vector(N)) vector_cosine_ops) WHERE embedding_model = name`,
and one more per writing system (`... AND script = s`), created on demand by
`ensure_index`. Queries cast the same way so the planner uses them.

Filtered queries must not lose recall: a plain HNSW scan returns the
`ef_search` nearest rows and only then applies the filter, so a selective
filter can leave nothing. Measured (BENCHMARKS.md, bench/filtered_vector.py):
when at most EXACT_SCAN_MAX_ROWS items pass the filter, an exact scan of them
is both exact and faster than walking the graph; otherwise pgvector 0.8's
iterative scan (`relaxed_order`) keeps walking until enough rows pass, and we
re-sort its results exactly afterwards.
"""
import re
from functools import lru_cache

from django.db import connection, transaction
from django.db.models.functions import Cast
from pgvector.django import CosineDistance, VectorField

from knowledge.search.text import SCRIPTS

# ef_search bounds the candidate list per scan step; iterative scans go on up
# to MAX_SCAN_TUPLES visited rows when a filter rejects most of them.
MIN_EF_SEARCH = 64
MAX_SCAN_TUPLES = 40_000
EXACT_SCAN_MAX_ROWS = 2_000
# Scripts with an index of their own ('' marks items without letters: they join another group's search).
INDEXED_SCRIPTS = tuple(script for script in SCRIPTS if script)


def index_name(model_name: str, dimensions: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", model_name.lower()).strip("_")[:30]
    return f"knowledge_hnsw_{slug}_{dimensions}"


def script_index_name(model_name: str, dimensions: int, script: str) -> str:
    return f"{index_name(model_name, dimensions)}_{script}"


@lru_cache(maxsize=16)
def ensure_index(model_name: str, dimensions: int) -> str:
    """Create this embedder's HNSW indexes if missing (idempotent, cached): one over all its vectors, and one
    per writing system (crosslingual.py searches each script's items; in the shared graph, a search for the
    Chinese items nearest an English query would walk through thousands of English ones first)."""
    name = index_name(model_name, dimensions)
    wanted = {name: ("", [model_name])} | {
        script_index_name(model_name, dimensions, script): ("AND script = %s", [model_name, script]) for script in INDEXED_SCRIPTS
    }
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE indexname = ANY(%s)", [list(wanted)])
        present = {row[0] for row in cursor.fetchall()}
        if present == set(wanted):
            return name
        if connection.in_atomic_block:
            # CREATE INDEX refuses to run while deferred FK checks are pending
            # in this transaction; run them now (they would run at commit).
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for index, (narrower, params) in wanted.items():
            if index not in present:
                cursor.execute(
                    f"CREATE INDEX IF NOT EXISTS {index} ON knowledge_knowledge "
                    f"USING hnsw ((embedding::vector({int(dimensions)})) vector_cosine_ops) "
                    f"WITH (m = 16, ef_construction = 64) WHERE embedding_model = %s {narrower}",
                    params,
                )
    return name


def distance_expression(vector, dimensions: int):
    return CosineDistance(Cast("embedding", VectorField(dimensions=dimensions)), vector)


def vector_candidates(
    queryset, *, vector, model_name: str, dimensions: int, limit: int, size: int | None = None
) -> list[tuple[str, float]]:
    """(id, cosine similarity) of the nearest items within `queryset`, best first.

    `size`: how many items of `queryset` have a vector from this model, when
    the caller has counted them (at least up to EXACT_SCAN_MAX_ROWS + 1).
    """
    ensure_index(model_name, dimensions)
    candidates = queryset.filter(embedding_model=model_name)
    distance = distance_expression(list(map(float, vector)), dimensions)
    if size is None:
        size = candidates[: EXACT_SCAN_MAX_ROWS + 1].count()
    if size <= EXACT_SCAN_MAX_ROWS:
        # `+ 0` keeps the planner off the HNSW index: an exact sort of few rows.
        exact = candidates.annotate(distance=distance + 0.0).order_by("distance", "id").values_list("id", "distance")[:limit]
        return [(item_id, 1.0 - float(d)) for item_id, d in exact]
    rows_query = candidates.annotate(distance=distance).order_by("distance").values_list("id", "distance")[:limit]
    with transaction.atomic(), connection.cursor() as cursor:
        # SET LOCAL: these settings end with this transaction.
        cursor.execute(f"SET LOCAL hnsw.ef_search = {max(MIN_EF_SEARCH, int(limit))}")
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute(f"SET LOCAL hnsw.max_scan_tuples = {MAX_SCAN_TUPLES}")
        rows = list(rows_query)
    rows.sort(key=lambda row: (row[1], row[0]))  # relaxed_order may be slightly out of order
    return [(item_id, 1.0 - float(distance)) for item_id, distance in rows]
