"""vector.nearest_of_each: a page of items' nearest neighbours in one statement, as vector_candidates finds each's."""
import numpy as np
import pytest
from django.db import connection

from knowledge.models import Knowledge
from knowledge.search import vector

pytestmark = pytest.mark.django_db

DIMS, MODEL = 16, "synthetic-test"


@pytest.fixture
def base():
    """300 items in two audiences, in clusters (so neighbours are close and ranks are not ties)."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(12, DIMS))
    rows = []
    for i in range(300):
        v = centres[i % 12] + rng.normal(size=DIMS) * 0.3
        rows.append(Knowledge(
            id=f"knowledge-20260101-{i:05d}", types=["tool"], task=f"t{i}", content="c", owner="agent:x", script="latin",
            scopes=["org:a"] if i % 3 else ["org:a", "org:b"], embedding=(v / np.linalg.norm(v)).tolist(), embedding_model=MODEL,
        ))
    Knowledge.objects.bulk_create(rows)
    vector.ensure_index.cache_clear()
    vector.ensure_index(MODEL, DIMS)
    return Knowledge.objects.filter(scopes__contains=["org:a"], scopes__contained_by=["org:a"], script="latin")


@pytest.mark.parametrize("exact", [True, False], ids=["exact-scan", "hnsw"])
def test_each_items_nearest_are_what_vector_candidates_finds_for_it(base, exact):
    ids = list(base.order_by("id").values_list("id", flat=True)[:60])
    found = vector.nearest_of_each(base, ids=ids, model_name=MODEL, dimensions=DIMS, limit=5, exact=exact)
    assert set(found) == set(ids)
    for item in Knowledge.objects.filter(pk__in=ids):
        alone = vector.vector_candidates(base.exclude(pk=item.pk), vector=item.embedding, model_name=MODEL, dimensions=DIMS,
                                         limit=5, size=0 if exact else 10_000)
        assert found[item.id] == alone and item.id not in dict(alone)


def test_the_index_scan_walks_the_scripts_hnsw_index(base):
    ids = list(base.values_list("id", flat=True)[:10])
    sql, params = vector.of_each_statement(base, ids=ids, model_name=MODEL, dimensions=DIMS, limit=5, exact=False)
    with vector.of_each_settings(5, exact=False, dimensions=DIMS), connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert f"Index Scan using {vector.script_index_name(MODEL, DIMS, 'latin')}" in plan and "Sort" not in plan


def test_a_search_too_large_for_an_exact_scan_walks_the_scripts_hnsw_index_whatever_the_planner_prefers(base):
    """At 10k items the planner read and sorted a script's 5,000 rows (80 ms) instead of walking its graph; here a
    high random_page_cost makes it prefer that plan over 300 rows."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL random_page_cost = 100000")
    plans = []

    def explain(execute, sql, params, many, context):
        if "<=>" in sql:
            with connection.connection.cursor() as cursor:  # the same transaction, so the same settings; no wrapper
                cursor.execute("EXPLAIN " + sql, params)
                plans.append("\n".join(row[0] for row in cursor.fetchall()))
        return execute(sql, params, many, context)

    query = base.first().embedding
    with connection.execute_wrapper(explain):
        found = vector.vector_candidates(base, vector=query, model_name=MODEL, dimensions=DIMS, limit=100, size=10_000)
    assert len(found) == 100
    assert len(plans) == 1
    assert f"Index Scan using {vector.script_index_name(MODEL, DIMS, 'latin')}" in plans[0] and "Sort" not in plans[0]
    with connection.cursor() as cursor:  # the settings ended with the search's transaction
        cursor.execute("SELECT current_setting('enable_seqscan'), current_setting('enable_sort')")
        assert cursor.fetchone() == ("on", "on")


def test_a_vector_literal_reads_back_as_the_same_float32_values():
    from pgvector import Vector

    values = np.random.default_rng(3).normal(size=896).astype(np.float32)
    values[:4] = [0.0, -0.0, 1e-38, 3.4e38]
    for given in (values, values.astype(np.float64), values.tolist(), Vector(values)):
        with connection.cursor() as cursor:
            cursor.execute("SELECT %s::vector::real[]", [vector.vector_literal(given)])
            (back,) = cursor.fetchone()
        assert np.array_equal(np.asarray(back, dtype=np.float32), values)
