"""A knowledge base of N realistic items, for the scale benchmarks.

    .venv/bin/python -m bench.seed_data --items 100000 [--fresh] [--index-after]

Items go into their own database on the embedded server (`knowhub_seed_<N>`,
or BENCH_DATABASE_URL), through the bulk path (`knowledge.bulk`), with a
progress bar. They have the seed's shape and a team's mix: half Chinese
(CMRC 2018 and XQuAD-R passages), half English (SciFact abstracts), read from
../shared/data; the task is the source article's title, the content two to
four passages of it (one in ten borrows a passage of another article, some
in the other language); six types; every item in scope `seed` and one of ten
team scopes (`team:0`..`team:9`, 10% each); a `project` tag of a hundred
(`p00`..`p99`, 1% each); scores, helpful and harmful counts spread as a
real base's are; creation dates over a year.

Vectors: precomputed once and stored. A pool of UNITS passages is embedded
with the real embedder (cached under var/bench-cache, a few minutes the first
time); an item's vector is its passages' vectors pooled as the worker pools
a long item's chunks (a mean, normalised per model). So the vectors have the
real models' geometry (clusters by topic and language) without embedding
100k texts; the task's words are in the keyword document but not in the
vector. Each item mixes its passages' vectors with random weights and a
little noise, so items drawn from the same passages are neighbours, not
clones (identical vectors by the hundred would be unlike any real base and
defeat HNSW). Keyword documents and scripts are computed exactly as for a
save.
"""
import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")

import numpy as np  # noqa: E402

from bench.datasets import DATA_DIR  # noqa: E402

UNITS = 3_000  # passages embedded for real: half Chinese, half English
SCOPE = "seed"
TEAMS = 10
PROJECTS = 100
TYPES = ["strategy", "tool", "usecase", "definition", "plan", "user_profile"]
TYPE_WEIGHTS = [0.3, 0.3, 0.15, 0.1, 0.1, 0.05]
SCORE_WEIGHTS = [0.05, 0.1, 0.5, 0.25, 0.1]  # scores 1..5
BATCH = 2_000


def database_for(items: int) -> str:
    return f"knowhub_seed_{items}"


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[。！？])|(?<=[.!?])\s+", text)
    return [p.strip() for p in parts if p and len(p.strip()) >= 8]


def _passages(text: str, *, low: int, high: int) -> list[str]:
    """Consecutive sentences joined into passages of about low..high characters."""
    out, current = [], ""
    for sentence in _sentences(text):
        current = f"{current} {sentence}".strip() if current and not re.search(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]$", current) else current + sentence
        if len(current) >= low:
            out.append(current[:high])
            current = ""
    return out


def source_articles() -> list[tuple[str, str, list[str]]]:
    """(language, title, passages) of every article read from ../shared/data, in file order."""
    articles = []
    for folder, language, low, high in (("cmrc2018-dev-zh", "zh", 60, 220), ("scifact-beir-en", "en", 120, 400)):
        with open(DATA_DIR / folder / "corpus.jsonl", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                passages = _passages(row["text"], low=low, high=high)
                if len(passages) >= 2:
                    articles.append((language, row.get("title") or passages[0][:40], passages))
    paragraphs: dict[str, list[str]] = {}  # XQuAD-R holds sentences: zh-a00-p000-s00 -> paragraph zh-a00-p000
    with open(DATA_DIR / "xquad-r-en-zh" / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if str(row["id"]).startswith("zh-"):
                paragraphs.setdefault(str(row["id"]).rsplit("-s", 1)[0], []).append(row["text"])
    for sentences in paragraphs.values():
        passages = _passages("".join(sentences), low=60, high=220)
        if len(passages) >= 2:
            articles.append(("zh", passages[0][:24], passages))
    return articles


def unit_pool(articles, rng: np.random.Generator, size: int = UNITS) -> tuple[list[tuple[int, str]], dict[int, list[int]]]:
    """`size` passages (article index, text), half per language, and article -> its units."""
    units: list[tuple[int, str]] = []
    for language in ("zh", "en"):
        chosen = [i for i, (lang, _, _) in enumerate(articles) if lang == language]
        rng.shuffle(chosen)
        wanted = size // 2
        for article in chosen:
            for text in articles[article][2][:4]:
                units.append((article, text))
                wanted -= 1
                if not wanted:
                    break
            if not wanted:
                break
    by_article: dict[int, list[int]] = {}
    for index, (article, _) in enumerate(units):
        by_article.setdefault(article, []).append(index)
    return units, by_article


def unit_vectors(units, embedder) -> np.ndarray:
    from django.conf import settings

    from bench.embed_cache import cached_matrix

    return cached_matrix(cache_dir=settings.VAR_DIR / "bench-cache", dataset=f"seed-units-{len(units)}", embedder=embedder,
                         ids=[f"u{i}" for i in range(len(units))], texts=[text for _, text in units])


NOISE = 0.015  # per dimension, after the weighted mean: an item is near its passages (cosine ~0.9), never a clone


def pooled(embedder, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random convex mix of `rows` with a little noise, normalised per model part as the worker stores a
    long item's chunks (indexing._pooled), so items drawn from the same passages differ as real texts on
    one topic do."""
    from knowledge.search.indexing import _pooled

    mixed = rng.dirichlet(np.ones(len(rows))) @ rows + rng.normal(0.0, NOISE, size=rows.shape[1])
    return np.asarray(_pooled(embedder, [mixed]), dtype=np.float32)


def entries(count: int, *, start: int, articles, units, by_article, vectors, embedder, rng) -> tuple[list[dict], np.ndarray]:
    from datetime import datetime, timedelta, timezone

    now = datetime(2026, 11, 1, tzinfo=timezone.utc)
    article_ids = list(by_article)
    rows, item_vectors = [], []
    for n in range(start, start + count):
        article = article_ids[rng.integers(len(article_ids))]
        own = by_article[article]
        picked = list(rng.choice(own, size=min(len(own), int(rng.integers(2, 5))), replace=False))
        if rng.random() < 0.1:
            picked.append(int(rng.integers(len(units))))  # a passage of another article (maybe another language)
        title = articles[article][1]
        created = now - timedelta(minutes=int(rng.integers(0, 365 * 24 * 60)))
        rows.append({
            "task": title,
            "content": "\n".join(units[u][1] for u in picked),
            "types": [str(rng.choice(TYPES, p=TYPE_WEIGHTS))],
            "scopes": [SCOPE, f"team:{n % TEAMS}"],
            "tags": {"project": f"p{int(rng.integers(PROJECTS)):02d}", "lang": articles[article][0]},
            "source": {"name": "bench.seed_data", "agent_id": f"agent-{n % 37}"},
            "message_id": f"seed-{n}",
            "score": int(rng.choice(5, p=SCORE_WEIGHTS)) + 1,
            "helpful": int(rng.poisson(1.5)),
            "harmful": int(rng.poisson(0.2)),
            "created_at": created,
        })
        item_vectors.append(pooled(embedder, vectors[picked], rng))
    return rows, np.vstack(item_vectors)


def seed(items: int, *, fresh: bool = False, units: int = UNITS, index_after: bool = False) -> int:
    """Fill the current database up to `items` seed items; returns how many were added.

    `index_after`: the HNSW indexes are dropped while the items go in and built at the end, each in one pass with
    parallel workers (the same indexes, under the same names; a graph built in one pass rather than item by item),
    several times faster than inserting a million vectors into three graphs as they grow."""
    from django.db import connection

    from agents.caller import Caller
    from knowledge import bulk
    from knowledge.models import Knowledge
    from knowledge.search import vector
    from knowledge.search.embeddings import get_embedder

    if fresh:
        Knowledge.objects.filter(scopes__contains=[SCOPE]).delete()
    have = Knowledge.objects.filter(scopes__contains=[SCOPE]).count()
    embedder = get_embedder()
    if have >= items:
        if index_after:  # an interrupted run may have left them dropped
            _build_indexes(connection, embedder)
        return 0
    rng = np.random.default_rng(20261127)
    articles = source_articles()
    pool, by_article = unit_pool(articles, rng, units)
    vectors = unit_vectors(pool, embedder)
    rng = np.random.default_rng(have)  # resuming continues with other draws
    if index_after:
        vector.ensure_index(embedder.name, embedder.dimensions)  # remembered as present: the bulk path will not build them
        from bench.search_latency import floor_index_name  # the floor's graph too: search_latency builds it again

        _drop_vector_indexes(connection, [*vector.index_names(embedder.name, embedder.dimensions), floor_index_name(embedder)])
    started, added = time.monotonic(), 0
    while have + added < items:
        count = min(BATCH, items - have - added)
        rows, item_vectors = entries(count, start=have + added, articles=articles, units=pool, by_article=by_article,
                                     vectors=vectors, embedder=embedder, rng=rng)
        bulk.knowledge_bulk_create(Caller.system("bench"), rows, vectors=item_vectors, model_name=embedder.name)
        added += count
        _progress(have + added, items, added / max(time.monotonic() - started, 1e-9))
    print(file=sys.stderr)
    if index_after:
        _build_indexes(connection, embedder)
    with connection.cursor() as cursor:
        # VACUUM sets the visibility map, for index-only scans (not possible inside a transaction: a test's)
        cursor.execute("ANALYZE knowledge_knowledge" if connection.in_atomic_block else "VACUUM ANALYZE knowledge_knowledge")
    return added


# An HNSW build whose graph does not fit in maintenance_work_mem goes on much more slowly on disk: 1M items at 896
# dimensions is ~4 GB of graph.
MAINTENANCE_WORK_MEM = "6GB"


def room_to_build(cursor) -> None:
    """Memory for the graph and parallel workers for the HNSW builds of the caller's transaction."""
    cursor.execute("SELECT set_config('maintenance_work_mem', %s, true), set_config('max_parallel_maintenance_workers', %s, true)",
                   [MAINTENANCE_WORK_MEM, str(os.cpu_count() or 2)])


def _drop_vector_indexes(connection, names: list[str]) -> None:
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute(f'DROP INDEX IF EXISTS "{name}"')


def _build_indexes(connection, embedder) -> None:
    """The embedder's HNSW indexes that are missing, built with room for the graph and parallel workers (on this
    connection, where ensure_index builds; the settings last as long as its transaction)."""
    from django.db import transaction

    from knowledge.search import vector

    built = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        room_to_build(cursor)
        vector.ensure_index.cache_clear()
        vector.ensure_index(embedder.name, embedder.dimensions)
    print(f"  HNSW indexes built in {time.monotonic() - built:.0f}s", file=sys.stderr)


def _progress(done: int, total: int, rate: float) -> None:
    width = 30
    filled = int(width * done / total)
    print(f"\r  [{'#' * filled}{'.' * (width - filled)}] {done}/{total} items ({rate:,.0f}/s)", end="", file=sys.stderr, flush=True)


def open_database(items: int) -> None:
    """Point Django at the seed database of `items` items (`database_for`), set it up and migrate it; the
    scale benches then `seed` it (a no-op once it holds them)."""
    from bench.retrieval import _point_at_bench_database

    _point_at_bench_database(database_for(items))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, required=True)
    parser.add_argument("--fresh", action="store_true", help="delete the seed items first")
    parser.add_argument("--index-after", action="store_true",
                        help="drop the HNSW indexes while inserting and build them at the end (1M items: hours faster)")
    args = parser.parse_args(argv)
    open_database(args.items)
    started = time.monotonic()
    added = seed(args.items, fresh=args.fresh, index_after=args.index_after)
    print(f"{added} items added in {time.monotonic() - started:.0f}s; database {database_for(args.items)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
