"""Write throughput: single saves, the bulk path, the worker's embedding, and time until a save is found.

    .venv/bin/python -m bench.ingest [--items 2000] [--saves 200]

On its own database (`knowhub_ingest` on the embedded server, emptied first;
BENCH_DATABASE_URL wins), with the HNSW indexes in place, items built by
bench/seed_data.py (Chinese and English, the seed's shape):

- single saves: `services.knowledge_create` one at a time, as the API's save
  runs it (keyword document at once, the vector left to the worker): saves/s
  and p50/p95 (the HTTP side is bench/api_load.py's `save`);
- bulk: `knowledge.bulk.knowledge_bulk_create` in batches of 500, without
  vectors (the worker embeds them) and with precomputed vectors (an import
  that carries them: every HNSW index updated in the INSERT);
- embedding: `indexing.embed_items`, what the worker runs, at batch sizes 1, 8
  and 32: items/s and characters/s;
- searchable: a real Celery worker runs beside; each of --probes saves is
  timed until a keyword search finds it and until a vector-only search does;
- imports (`--imports N`, only then): `ingest.importer.import_file` in-process, what an import job runs, on a CSV
  of N rows and on the JSON Lines export of those N items: rows/s and items/s.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")

import numpy as np  # noqa: E402

from bench.machine import describe  # noqa: E402

SCOPE = "ingest"
DATABASE = "knowhub_ingest"
BULK_BATCH = 500


def sample_items(count: int, *, start: int = 0, units: int | None = None):
    """(entries, vectors) of `count` seed-shaped items, vectors pooled from really embedded passages."""
    from bench import seed_data
    from knowledge.search.embeddings import get_embedder

    embedder = get_embedder()
    rng = np.random.default_rng(20261127)
    articles = seed_data.source_articles()
    pool, by_article = seed_data.unit_pool(articles, rng, units or seed_data.UNITS)
    vectors = seed_data.unit_vectors(pool, embedder)
    rows, item_vectors = seed_data.entries(count, start=start, articles=articles, units=pool, by_article=by_article,
                                           vectors=vectors, embedder=embedder, rng=np.random.default_rng(start))
    for row in rows:
        row["scopes"] = [SCOPE]
    return rows, item_vectors


def single_saves(rows) -> dict:
    from agents.caller import Caller
    from knowledge.services import knowledge_create

    samples = []
    for row in rows[:5]:  # warm-up: the segmenter loads on the first save
        knowledge_create(Caller.system("bench"), embed=False, **{k: v for k, v in row.items() if k != "created_at"})
    for row in rows[5:]:
        started = time.perf_counter()
        knowledge_create(Caller.system("bench"), embed=False, **{k: v for k, v in row.items() if k != "created_at"})
        samples.append(time.perf_counter() - started)
    return {"per_second": len(samples) / sum(samples), "p50_ms": 1000 * statistics.median(samples),
            "p95_ms": 1000 * float(np.percentile(samples, 95))}


def bulk(rows, vectors=None) -> float:
    """Items per second through knowledge_bulk_create."""
    from agents.caller import Caller
    from knowledge.bulk import knowledge_bulk_create
    from knowledge.search.embeddings import get_embedder

    name = get_embedder().name
    started = time.perf_counter()
    for at in range(0, len(rows), BULK_BATCH):
        knowledge_bulk_create(Caller.system("bench"), rows[at : at + BULK_BATCH], embed=False,
                              vectors=None if vectors is None else vectors[at : at + BULK_BATCH], model_name=name)
    return len(rows) / (time.perf_counter() - started)


def embedding(batch_sizes=(1, 8, 32), count: int = 64) -> list[dict]:
    """What the worker does per batch: embed task + content and store the vector."""
    from knowledge.models import Knowledge
    from knowledge.search.embeddings import get_embedder, item_text
    from knowledge.search.indexing import embed_items

    embedder = get_embedder()
    out = []
    for size in batch_sizes:
        items = list(Knowledge.objects.filter(scopes__contains=[SCOPE], embedding__isnull=True).order_by("id")[:count])
        chars = sum(len(item_text(i.task, i.content)) for i in items)
        started = time.perf_counter()
        for at in range(0, len(items), size):
            embed_items(items=items[at : at + size], embedder=embedder)
        elapsed = time.perf_counter() - started
        out.append({"batch": size, "items_per_second": len(items) / elapsed, "chars_per_second": chars / elapsed})
    return out


def searchable(rows, probes: int) -> dict:
    """Seconds from a save's commit until keyword search, then vector-only search, finds it (a real worker runs)."""
    from knowledge.search import engine
    from knowledge.search.rerank import Gate
    from agents.caller import Caller
    from knowledge.services import knowledge_create

    open_gate = Gate(answer=0.0, floor=0.0, relative=0.0)
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "knowhub_site", "worker", "--loglevel", "warning",
                               "--concurrency", "1", "--hostname", "bench-ingest@%h"], cwd=ROOT, env=os.environ.copy(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    keyword_s, vector_s = [], []
    try:
        time.sleep(8)  # the worker boots and loads its models
        for n, row in enumerate(rows[:probes]):
            marker = f"probe{n}x{int(time.time())}"
            item = knowledge_create(Caller.system("bench"), task=f"{row['task']} {marker}", content=row["content"],
                                    types=row["types"], scopes=[SCOPE])
            saved = time.perf_counter()
            found = lambda mode, q: any(h.id == item.id for h in engine.search(  # noqa: E731
                query=q, top_k=10, min_score=1, readable_scopes=[SCOPE], mode=mode, gate=open_gate).hits)
            while not found("keyword", marker):
                time.sleep(0.01)
            keyword_s.append(time.perf_counter() - saved)
            while not found("vector", row["content"][:200]) and time.perf_counter() - saved < 120:
                time.sleep(0.1)
            vector_s.append(time.perf_counter() - saved)
    finally:
        worker.terminate()
        worker.wait(30)
    return {"keyword_s": statistics.median(keyword_s), "vector_s": statistics.median(vector_s), "probes": len(vector_s)}


def imports(count: int) -> tuple[float, float, float]:
    """(CSV rows/s, JSON Lines items/s without vectors, and with them): `count` rows imported as an import job runs
    them, then their export imported again after deleting them, without vectors (the worker embeds the items again)
    and with them (the export's own vectors kept; here random unit vectors of the embedder's dimensions stored
    before the export, which cost an import what real ones do)."""
    from django.conf import settings

    from agents.caller import Caller
    from api.transfer import jsonl
    from ingest.export import export_records
    from ingest.importer import import_file
    from knowledge.models import Knowledge
    from knowledge.search.embeddings import get_embedder
    from knowledge.search.indexing import store_embeddings
    from knowledge.search.vector import ensure_index

    scope = f"org:{SCOPE}"
    caller = Caller.system("command:import")
    rows = ["task,content,types,scopes,tags"] + [
        f"Task number {i} about deploying service {i % 97},Step one then step two for case {i}; check the logs,"
        f"strategy,{scope},domain=ops" for i in range(count)]
    started = time.perf_counter()
    report = import_file(caller, name="tips.csv", data="\n".join(rows).encode(), scopes=[scope])
    csv_rate = report.imported / (time.perf_counter() - started)
    ids = list(Knowledge.objects.filter(scopes__contains=[scope]).values_list("id", flat=True))
    model, dimensions = settings.KNOWHUB_EMBEDDING_MODEL, get_embedder().dimensions
    vectors = np.random.default_rng(20261207).normal(size=(len(ids), dimensions))
    ensure_index(model, dimensions)
    store_embeddings(ids=ids, vectors=vectors / np.linalg.norm(vectors, axis=1, keepdims=True), model_name=model)
    rates, texts = [], [
        "".join(jsonl(export_records(caller, scopes=[scope], passphrase=None, embedding_model=model, vectors=kept)))
        for kept in (False, True)]
    for text in texts:
        Knowledge.objects.filter(scopes__contains=[scope]).delete()
        started = time.perf_counter()
        report = import_file(caller, name="backup.jsonl", data=text.encode())
        rates.append(report.imported / (time.perf_counter() - started))
    Knowledge.objects.filter(scopes__contains=[scope]).delete()
    return csv_rate, *rates


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=2000, help="items per bulk measurement")
    parser.add_argument("--saves", type=int, default=200)
    parser.add_argument("--probes", type=int, default=5)
    parser.add_argument("--imports", type=int, default=0, help="rows of the CSV and JSON Lines imports (0: none)")
    args = parser.parse_args(argv)
    from bench.retrieval import _point_at_bench_database

    _point_at_bench_database(DATABASE)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from knowledge.models import Knowledge

    Knowledge.objects.filter(scopes__contains=[SCOPE]).delete()
    print(f"{describe()}\n")
    if args.imports:
        csv_rate, plain, with_vectors = imports(args.imports)
        print(f"imports of {args.imports:,}: CSV {csv_rate:,.0f} rows/s; JSON Lines (our export) without vectors "
              f"{plain:,.0f} items/s, with vectors {with_vectors:,.0f} items/s")
        return 0
    rows, vectors = sample_items(args.saves + 2 * args.items)
    saves = single_saves(rows[: args.saves])
    print(f"single saves (knowledge_create, no HTTP): {saves['per_second']:.0f}/s, p50 {saves['p50_ms']:.1f} ms, "
          f"p95 {saves['p95_ms']:.1f} ms")
    plain = bulk(rows[args.saves : args.saves + args.items])
    print(f"bulk without vectors (the worker embeds): {plain:,.0f} items/s")
    with_vectors = bulk(rows[args.saves + args.items :], vectors[args.saves + args.items :])
    print(f"bulk with vectors (every HNSW index updated): {with_vectors:,.0f} items/s")
    for row in embedding():
        print(f"embedding, batches of {row['batch']}: {row['items_per_second']:.1f} items/s, "
              f"{row['chars_per_second']:,.0f} chars/s")
    # the worker's sweep would embed every item still without a vector before the probes: they go first
    Knowledge.objects.filter(scopes__contains=[SCOPE], embedding__isnull=True).delete()
    found = searchable(rows[: args.probes], args.probes)
    print(f"searchable after a save (median of {found['probes']}): by keyword {1000 * found['keyword_s']:.0f} ms, "
          f"by vector {found['vector_s']:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
