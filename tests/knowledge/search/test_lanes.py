"""A search's stage-1 statements side by side on lanes (knowledge/search/lanes.py): each writing system's vector walk
and the keyword scoring on a connection of their own, with the same results as one after the other."""
import threading

import numpy as np
import pytest
from django.db import connection, transaction

from knowledge.search import crosslingual, engine, lanes
from knowledge.search.crosslingual import calibrated_vector_candidates
from knowledge.search.indexing import store_embeddings
from tests.factories import make_knowledge

MODEL, DIMS = "bench-8", 8


class VectorsOnly:
    name, dimensions = MODEL, DIMS


def _store(rng, text, count, scope="a"):
    ids = [make_knowledge(task=f"{text} {i}", content=f"{text} {i}", scopes=[scope], embed=False).id
           for i in range(count)]
    vectors = rng.normal(size=(count, DIMS))
    store_embeddings(ids=ids, vectors=list(vectors / np.linalg.norm(vectors, axis=1, keepdims=True)), model_name=MODEL)
    return ids


@pytest.fixture
def two_scripts():
    """A base with two writing systems large enough to be walked apart (crosslingual.MIN_GROUP_FOR_Z each)."""
    rng = np.random.default_rng(11)
    _store(rng, "Deploy notes", crosslingual.MIN_GROUP_FOR_Z + 5)
    _store(rng, "部署说明", crosslingual.MIN_GROUP_FOR_Z + 5)
    return np.eye(DIMS)[0]


@pytest.fixture
def with_lanes(settings):
    settings.KNOWHUB_SEARCH_LANES = 2
    yield
    lanes.close()


class Walks:
    """Records, for each vector walk, the thread that ran it and its database connection's backend."""

    def __init__(self, monkeypatch):
        self.seen = []
        real = crosslingual.vector_candidates

        def recording(*args, **kwargs):
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.seen.append((threading.current_thread().name, cursor.fetchone()[0]))
            return real(*args, **kwargs)

        monkeypatch.setattr(crosslingual, "vector_candidates", recording)


def _own_backend() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _search(query_vector):
    from knowledge.models import Knowledge

    return calibrated_vector_candidates(Knowledge.objects.all(), query="how do we deploy", query_vector=query_vector,
                                        embedder=VectorsOnly(), limit=20)


@pytest.mark.django_db(transaction=True)  # a lane sees committed rows only
def test_each_scripts_walk_but_the_last_runs_on_a_lane_of_its_own_and_the_list_is_the_same(monkeypatch, settings, two_scripts):
    settings.KNOWHUB_SEARCH_LANES = 0
    one_after_the_other = _search(two_scripts)
    walks = Walks(monkeypatch)
    settings.KNOWHUB_SEARCH_LANES = 2
    try:
        side_by_side = _search(two_scripts)
    finally:
        lanes.close()
    assert side_by_side == one_after_the_other
    threads = [name for name, _ in walks.seen]
    assert len(threads) == 2 and sum(name.startswith("knowhub-search-lane") for name in threads) == 1
    assert len({backend for _, backend in walks.seen}) == 2  # two connections at once
    assert _own_backend() in {backend for _, backend in walks.seen}  # the last walk on the caller's own


@pytest.mark.django_db(transaction=True)
def test_the_keyword_scoring_runs_on_a_lane_while_the_vector_walks_run(monkeypatch, with_lanes):
    make_knowledge(task="Rotate proxies on ERR_CONNECTION_RESET", content="Retry with backoff; the server drops bursts.")
    threads = []
    real = engine.keyword_candidates

    def recording(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "keyword_candidates", recording)
    result = engine.search(query="proxies connection reset", top_k=1, min_score=1)
    assert threads and threads[0].startswith("knowhub-search-lane")
    assert result.candidates[0].explanation["keyword_rank"] == 1


@pytest.mark.django_db  # the test's own transaction: its rows are not committed
def test_inside_a_transaction_every_statement_stays_on_the_callers_connection(monkeypatch, with_lanes, two_scripts):
    walks = Walks(monkeypatch)
    with transaction.atomic():
        found = _search(two_scripts)
    assert len(found) == 20  # the uncommitted items were found: a lane would have seen none of them
    assert {name for name, _ in walks.seen} == {threading.current_thread().name}


@pytest.mark.django_db(transaction=True)
def test_with_every_lane_taken_the_walks_run_at_once_in_the_callers_thread(monkeypatch, with_lanes, two_scripts):
    release = threading.Event()
    taken = [lanes._lanes_of_process().if_idle(release.wait, 30) for _ in range(2)]
    walks = Walks(monkeypatch)
    try:
        assert len(_search(two_scripts)) == 20
    finally:
        release.set()
        for started in taken:
            started()
    assert {name for name, _ in walks.seen} == {threading.current_thread().name}


@pytest.mark.django_db(transaction=True)
def test_a_lane_whose_connection_the_database_dropped_connects_again_and_the_search_answers(monkeypatch, with_lanes, two_scripts):
    walks = Walks(monkeypatch)
    first = _search(two_scripts)
    (lane_backend,) = {backend for name, backend in walks.seen if name.startswith("knowhub-search-lane")}
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [lane_backend])
    walks.seen.clear()
    assert _search(two_scripts) == first
    assert _search(two_scripts) == first
    assert lane_backend not in {backend for _, backend in walks.seen}
