"""How slim's group finding grows with the base: a dry run's `find_groups` at each size.

    .venv/bin/python -m bench.slim --items 10000,100000

Each size uses the database bench/seed_data.py fills (seeding it first if
needed). `knowledge.slim.find_groups` asks for each active item's nearest
items of the same audience (scopes), a page of items per statement
(`neighbours.close_pairs_among`; through the vector index once an audience
has more than 2,000 items of a script), so it should grow close to n log n:
the table gives seconds, items/s, and the time divided by n·log2(n)
relative to the smallest size (1.0 means exactly n log n). The
LLM's merge of each group is not part of it (a dry run proposes groups only).
"""
import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")


def measure(items: int) -> dict:
    from knowledge.slim import find_groups

    started = time.perf_counter()
    groups = find_groups()
    seconds = time.perf_counter() - started
    return {"items": items, "seconds": seconds, "groups": len(groups), "grouped": sum(len(g) for g in groups)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", default="10000", help="comma-separated sizes, each its own seeded database")
    parser.add_argument("--exact-scan-max-rows", type=int, default=None,
                        help="what-if: the largest audience (per writing system) scanned exactly instead of through the "
                             "HNSW index (default: knowledge.search.vector's 2,000; 0 sends every audience through the index)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.items.split(",")]
    if args.one:
        from bench.seed_data import open_database, seed

        open_database(sizes[0])
        seed(sizes[0])
        if args.exact_scan_max_rows is not None:
            from knowledge.search import vector

            vector.EXACT_SCAN_MAX_ROWS = args.exact_scan_max_rows
        row = measure(sizes[0])
        print(f"{row['items']} {row['seconds']:.3f} {row['groups']} {row['grouped']}", flush=True)
        return 0
    print("| items | seconds | items/s | groups (items in them) | time ÷ n·log2 n, relative |\n|---|---|---|---|---|")
    base = None
    for size in sizes:  # one process per database: Django binds its settings once
        what_if = [] if args.exact_scan_max_rows is None else ["--exact-scan-max-rows", str(args.exact_scan_max_rows)]
        out = subprocess.run([sys.executable, "-m", "bench.slim", "--items", str(size), "--one", *what_if], check=True,
                             cwd=ROOT, capture_output=True, text=True).stdout.split()
        items, seconds, groups, grouped = int(out[0]), float(out[1]), int(out[2]), int(out[3])
        per = seconds / (items * math.log2(items))
        base = base or per
        print(f"| {items:,} | {seconds:.1f} | {items / seconds:,.0f} | {groups} ({grouped}) | {per / base:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
