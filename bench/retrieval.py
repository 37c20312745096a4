"""Run a BEIR-format dataset through the real search stack.

    .venv/bin/python -m bench.retrieval scifact-beir-en cmrc2018-dev-zh xquad-r-en-zh

Prints nDCG@10, recall@10 and MRR@10 for vector-only, keyword-only and hybrid
search. Items go into a separate database (`knowhub_bench` on the embedded
server, or BENCH_DATABASE_URL), one scope per dataset, so the dev data is
untouched; corpus vectors are cached under var/bench-cache (see
embed_cache.py). Queries go through `knowledge.search.engine.search` exactly
as the API's do, stage-2 rerank included.
"""
import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")


def _point_at_bench_database(database: str = "knowhub_bench") -> None:
    """Point Django at `database` on the embedded server (BENCH_DATABASE_URL, when set, wins)."""
    if os.environ.get("BENCH_DATABASE_URL"):
        os.environ["DATABASE_URL"] = os.environ["BENCH_DATABASE_URL"]
        return
    from knowhub_site import embedded_db
    from core.env import env_str

    server = embedded_db.start(Path(env_str("KNOWHUB_VAR_DIR", str(ROOT / "var"))))
    embedded_db.ensure_database(server.url("postgres"), database)
    os.environ["DATABASE_URL"] = server.url(database)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+", help="folder names under ../shared/data, or paths")
    parser.add_argument("--modes", default="vector,keyword,hybrid")
    parser.add_argument("--embedder", help="embedder name (default: KNOWHUB_EMBEDDING_MODEL)")
    parser.add_argument("--max-queries", type=int, default=0, help="0 = all")
    parser.add_argument("--query-prefix", default="", help="only queries whose id starts with this (xquad: en- / zh-)")
    parser.add_argument("--relevant-prefix", default="", help="only judged docs whose id starts with this (cross-lingual cuts)")
    parser.add_argument("--rrf-k", type=int, default=None)
    parser.add_argument("--weights", default="", help="e.g. vector=1,keyword=0.5; several configurations separated by ';'")
    parser.add_argument("--fusion", choices=["softmax", "boost", "convex", "rrf"], help="default: the engine's")
    args = parser.parse_args(argv)

    _point_at_bench_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from bench.runner import evaluate

    configs = [
        {k: float(v) for k, v in (pair.split("=") for pair in config.split(",") if pair)} or None
        for config in (args.weights.split(";") if args.weights else [""])
    ]
    print("| dataset | queries | mode | nDCG@10 | recall@10 | MRR@10 | ms/query |")
    print("|---|---|---|---|---|---|---|")
    for name in args.datasets:
      for i, weights in enumerate(configs):
        modes = args.modes.split(",") if i == 0 else [m for m in args.modes.split(",") if m == "hybrid"]
        for row in evaluate(
            name,
            modes=modes,
            embedder_name=args.embedder,
            max_queries=args.max_queries,
            query_prefix=args.query_prefix,
            relevant_prefix=args.relevant_prefix,
            rrf_k=args.rrf_k,
            weights=weights,
            fusion=args.fusion,
        ):
            print(
                f"| {row['dataset']} | {row['queries']} | {row['mode']} | {row['ndcg@10']:.3f} | "
                f"{row['recall@10']:.3f} | {row['mrr@10']:.3f} | {row['ms_per_query']:.0f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    code = main()
    print(f"\n({time.monotonic() - t0:.0f}s)", file=sys.stderr)
    sys.exit(code)
