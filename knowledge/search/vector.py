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
from contextlib import contextmanager
from functools import lru_cache

from django.db import connection, transaction
from django.db.models import CharField
from django.db.models.expressions import RawSQL
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
    if size is None:
        size = candidates[: EXACT_SCAN_MAX_ROWS + 1].count()
    exact = exact_scan(size)
    nearest = _nearest(candidates, distance_expression(list(map(float, vector)), dimensions), limit=limit, exact=exact)
    with _scan_settings(limit, exact=exact):
        rows = list(nearest)
    rows.sort(key=lambda row: (row[1], row[0]))  # the exact scan's order; relaxed_order may be slightly out of it
    return [(item_id, 1.0 - float(distance)) for item_id, distance in rows]


def nearest_of_each(queryset, *, ids: list[str], model_name: str, dimensions: int, limit: int,
                    exact: bool) -> dict[str, list[tuple[str, float]]]:
    """For each item of `ids` (items with a vector from this model), what
    `vector_candidates(queryset.exclude(pk=id), vector=<its stored vector>, ...)`
    returns, in one statement: a LATERAL join over the items whose inner query
    is vector_candidates' own (the script's partial HNSW index, or the exact
    scan when `exact`: the caller decides by size with `exact_scan`, as
    vector_candidates does). Items without neighbours are left out."""
    ensure_index(model_name, dimensions)
    others = queryset.filter(embedding_model=model_name).exclude(pk=RawSQL("page.id", (), output_field=CharField()))
    page_vector = RawSQL("page.embedding", (), output_field=VectorField())
    inner, params = _nearest(others, distance_expression(page_vector, dimensions), limit=limit, exact=exact).query.sql_with_params()
    sql = (f"SELECT page.id, near.id, near.distance FROM knowledge_knowledge AS page "
           f"CROSS JOIN LATERAL ({inner}) AS near(id, distance) WHERE page.id = ANY(%s)")
    with _scan_settings(limit, exact=exact), connection.cursor() as cursor:
        cursor.execute(sql, [*params, list(ids)])
        rows = cursor.fetchall()
    found: dict[str, list[tuple[str, float]]] = {}
    for item_id, other, distance in sorted(rows, key=lambda row: (row[0], row[2], row[1])):
        found.setdefault(item_id, []).append((other, 1.0 - float(distance)))
    return found


def exact_scan(size: int) -> bool:
    """Whether `size` candidates are few enough for an exact scan (faster than the graph, and exact)."""
    return size <= EXACT_SCAN_MAX_ROWS


def _nearest(candidates, distance, *, limit: int, exact: bool):
    if exact:
        # `+ 0` keeps the planner off the HNSW index: an exact sort of few rows.
        return candidates.annotate(distance=distance + 0.0).order_by("distance", "id").values_list("id", "distance")[:limit]
    return candidates.annotate(distance=distance).order_by("distance").values_list("id", "distance")[:limit]


@contextmanager
def _scan_settings(limit: int, *, exact: bool):
    """The HNSW scan's settings for the statements run inside (nothing for an exact scan)."""
    if exact:
        yield
        return
    with transaction.atomic(), connection.cursor() as cursor:
        # SET LOCAL: these settings end with this transaction.
        cursor.execute(f"SET LOCAL hnsw.ef_search = {max(MIN_EF_SEARCH, int(limit))}")
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute(f"SET LOCAL hnsw.max_scan_tuples = {MAX_SCAN_TUPLES}")
        yield
