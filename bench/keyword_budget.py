"""Keyword quality and time per query against `keyword.SCORE_BUDGET` (how many items BM25 may score).

    .venv/bin/python -m bench.keyword_budget scifact-beir-en cmrc2018-dev-zh [--budgets 0,3000,1000,500,250]

Keyword retrieval alone (`keyword_candidates`, lists of 100, the dataset's own scope as the base),
on the `knowhub_bench` database bench/retrieval.py uses; 0 means unbounded. Prints nDCG@10,
recall@100 and ms/query per budget. No vectors are needed.
"""
import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")


def grid(name: str, budgets: list[int]) -> list[dict]:
    from bench import datasets, metrics
    from bench.runner import ingest, scope_for
    from knowledge.search import engine, keyword

    data = datasets.load(name)
    doc_by_id = ingest(data)
    base = engine.narrowed(engine.visible(readable_scopes=[scope_for(data.name)]))
    rows, kept = [], keyword.SCORE_BUDGET
    try:
        for budget in budgets:
            keyword.SCORE_BUDGET = budget or 10**12
            ndcg, recall, started = [], [], time.perf_counter()
            for qid, text in data.queries.items():
                relevant = data.qrels.get(qid)
                if not relevant:
                    continue
                ranked = [doc_by_id[i] for i, _ in keyword.keyword_candidates(base, text=text, limit=100, statistics=base)]
                ndcg.append(metrics.ndcg_at_k(ranked[:10], relevant, 10))
                recall.append(metrics.recall_at_k(ranked, relevant, 100))
            rows.append({"dataset": data.name, "budget": budget, "queries": len(ndcg), "ndcg@10": metrics.mean(ndcg),
                         "recall@100": metrics.mean(recall), "ms": 1000 * (time.perf_counter() - started) / max(len(ndcg), 1)})
    finally:
        keyword.SCORE_BUDGET = kept
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--budgets", default="0,3000,1000,500,250")
    args = parser.parse_args(argv)
    from bench.retrieval import _point_at_bench_database

    _point_at_bench_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    print("| dataset | SCORE_BUDGET | queries | nDCG@10 | recall@100 | ms/query |\n|---|---|---|---|---|---|")
    for name in args.datasets:
        for row in grid(name, [int(b) for b in args.budgets.split(",")]):
            print(f"| {row['dataset']} | {row['budget'] or 'unbounded'} | {row['queries']} | {row['ndcg@10']:.4f} "
                  f"| {row['recall@100']:.4f} | {row['ms']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
