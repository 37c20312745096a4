"""The search engine's per-process caches at scale: the search that finds a base's word statistics expired, and the
script groups' counts (issue 14).

    .venv/bin/python -m bench.search_caches --items 10000 [--queries 30] [--calls 200]

Reads a seeded database (bench/seed_data.py) and never seeds one: it stops when the database holds fewer seed
items than asked (run bench.search_latency for that size first).

- statistics: per question (the bench's, half Chinese, half English), one keyword-mode search to fill the base's
  word statistics, one timed with them fresh, then the base's entry made expired (not too old: keyword.py) and the
  next search timed, and one more once any refresh has landed. Keyword mode: no model, no vectors.
- script counts: `crosslingual.scripts_present` per call for each of search_latency's filters, beside one read of
  the search generation (`result_cache.generation`), the same base asked again and again.
"""
import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")

import numpy as np  # noqa: E402

from bench.machine import describe  # noqa: E402


def _ms(samples: list[float]) -> str:
    p50, p95 = np.percentile(np.asarray(samples) * 1000.0, [50, 95])
    return f"{p50:.1f} / {p95:.1f} / {max(samples) * 1000.0:.1f}"


def statistics_stall(texts: list[str]) -> None:
    from bench.search_latency import READER_SCOPES
    from knowledge.search import engine, keyword

    def search(text: str) -> float:
        started = time.perf_counter()
        engine.search(query=text, top_k=5, readable_scopes=READER_SCOPES, mode="keyword")
        return time.perf_counter() - started

    fresh, expired, after = [], [], []
    for text in texts:
        search(text)
        fresh.append(search(text))
        for entry in keyword._statistics.values():
            entry.expires = time.monotonic() - 1.0
        expired.append(search(text))
        for thread in list(getattr(keyword, "_refreshing", {}).values()):  # the refresh, where there is one
            thread.join()
        after.append(search(text))
    print("| keyword-mode search | p50 / p95 / max ms |\n|---|---|")
    print(f"| word statistics fresh | {_ms(fresh)} |")
    print(f"| the first to find them expired | {_ms(expired)} |")
    print(f"| the next, once a refresh has landed | {_ms(after)} |\n", flush=True)


def script_counts(calls: int) -> None:
    from django.conf import settings

    from bench.search_latency import FILTERS, READER_SCOPES
    from knowledge.search import crosslingual, engine, result_cache

    def timed(run) -> list[float]:
        run()
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            run()
            samples.append(time.perf_counter() - started)
        return samples

    print("| filter | scripts_present p50 / p95 / max ms | generation read p50 / p95 / max ms | groups |\n|---|---|---|---|")
    for label, narrowing in FILTERS.items():
        base = engine.narrowed(engine.visible(readable_scopes=READER_SCOPES), **narrowing)
        present = timed(lambda: crosslingual.scripts_present(base, model_name=settings.KNOWHUB_EMBEDDING_MODEL))  # noqa: B023
        generation = timed(result_cache.generation)
        groups = crosslingual.scripts_present(base, model_name=settings.KNOWHUB_EMBEDDING_MODEL)
        print(f"| {label} | {_ms(present)} | {_ms(generation)} | {groups} |", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10000, help="the seeded database's size")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args(argv)
    from bench.retrieval import _point_at_bench_database
    from bench.seed_data import SCOPE, database_for

    _point_at_bench_database(database_for(args.items))
    import django

    django.setup()
    from bench.search_latency import questions
    from knowledge.models import Knowledge

    have = Knowledge.objects.filter(scopes__contains=[SCOPE]).count()
    if have < args.items:
        print(f"{database_for(args.items)} holds {have} seed items, not {args.items}: seed it first", file=sys.stderr)
        return 1
    print(f"{describe()}\n\n{database_for(args.items)}: {have:,} seed items\n")
    statistics_stall(questions(args.queries))
    script_counts(args.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
