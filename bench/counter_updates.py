"""What a report's counter update costs on a seeded base, and how many find room on their row's page.

    .venv/bin/python -m bench.counter_updates --items 100000 [--updates 1500] [--fillfactor 80]

On the database bench/seed_data.py fills (`knowhub_seed_<N>`), `feedback.counters_add` (the UPDATE every helpful
report runs) on `--updates` random items, each in its own transaction, rolled back (the seed keeps its counters;
the row's new version is written all the same). Reports ms per update (p50 / p95 / mean) and the share of HOT
updates (PostgreSQL wrote the new version on the row's own page and added no index entry; the others add one to
each of the row's indexes, the HNSW graphs among them), with the table's fillfactor and size.

`--fillfactor N` first sets the table's fillfactor and rewrites it (`VACUUM FULL`, which rebuilds every index: about
1.5 minutes at 100k items) so that the pages already written leave that room: how the before and after of
BENCHMARKS.md "Writes" were measured on one base.
"""
import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")

from bench.machine import describe  # noqa: E402


def table_state(cursor) -> tuple[str, str]:
    cursor.execute("SELECT coalesce((SELECT option_value FROM pg_options_to_table(reloptions) "
                   "WHERE option_name = 'fillfactor'), '100'), pg_size_pretty(pg_relation_size(oid)) "
                   "FROM pg_class WHERE oid = 'knowledge_knowledge'::regclass")
    return cursor.fetchone()


def updated(cursor) -> tuple[int, int]:
    cursor.execute("SELECT pg_stat_force_next_flush()")
    cursor.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'knowledge_knowledge'")
    return cursor.fetchone()


def measure(updates: int, *, seed: int = 1) -> dict:
    from django.db import connection, transaction

    from knowledge import feedback

    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM knowledge_knowledge")
        ids = [row[0] for row in cursor.fetchall()]
        before = updated(cursor)
    picked = random.Random(seed).sample(ids, min(updates, len(ids)))
    times = []
    for item_id in picked:
        started = time.perf_counter()
        with transaction.atomic():
            feedback.counters_add(knowledge_id=item_id, helpful=1)
            transaction.set_rollback(True)
        times.append(time.perf_counter() - started)
    time.sleep(0.5)  # the statistics of the last transactions reach the shared counters
    with connection.cursor() as cursor:
        after = updated(cursor)
        fillfactor, size = table_state(cursor)
    times.sort()
    total, hot = after[0] - before[0], after[1] - before[1]
    return {"updates": len(picked), "fillfactor": fillfactor, "size": size, "hot": hot / total if total else None,
            "p50": times[len(times) // 2] * 1000, "p95": times[int(len(times) * 0.95)] * 1000,
            "mean": sum(times) / len(times) * 1000}


def rewrite(fillfactor: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE knowledge_knowledge SET (fillfactor = {int(fillfactor)})")
        cursor.execute("SET maintenance_work_mem = '2GB'")
        started = time.monotonic()
        cursor.execute("VACUUM FULL ANALYZE knowledge_knowledge")
    print(f"fillfactor {fillfactor}: table rewritten in {time.monotonic() - started:.0f}s", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, required=True, help="the seed database (bench/seed_data.py)")
    parser.add_argument("--updates", type=int, default=1500)
    parser.add_argument("--fillfactor", type=int, help="rewrite the table with this fillfactor first (10-100)")
    parser.add_argument("--seed", type=int, default=1, help="which random items")
    args = parser.parse_args(argv)
    if args.fillfactor is not None and not 10 <= args.fillfactor <= 100:
        parser.error("--fillfactor: between 10 and 100")
    from bench.seed_data import open_database, seed

    open_database(args.items)
    seed(args.items)
    print(f"{describe()}\n", flush=True)
    if args.fillfactor is not None:
        rewrite(args.fillfactor)
    row = measure(args.updates, seed=args.seed)
    hot = "n/a" if row["hot"] is None else f"{row['hot']:.0%}"
    print("| items | fillfactor | table | updates | HOT | p50 / p95 / mean ms |\n|---|---|---|---|---|---|")
    print(f"| {args.items:,} | {row['fillfactor']} | {row['size']} | {row['updates']} | {hot} | "
          f"{row['p50']:.2f} / {row['p95']:.2f} / {row['mean']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
