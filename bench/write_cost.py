"""What one index or trigger costs each write, on a seeded base: with it and without it, alternating.

    .venv/bin/python -m bench.write_cost --items 100000 --index NAME [--rounds 6]
    .venv/bin/python -m bench.write_cost --items 100000 --trigger NAME [--rounds 6]

On the database bench/seed_data.py fills (`knowhub_seed_<items>`; BENCH_DATABASE_URL wins):

- `--index`: the worker's vector write, an UPDATE giving 300 items another item's vector (every index of the row
  gets an entry, each HNSW graph holding the item an insert), in a transaction that is rolled back; "without"
  drops the index inside that transaction. Reports ms per item.
- `--trigger`: a helpful report's counter UPDATE, committed one item at a time (`synchronous_commit` off: the
  CPU, not the disk's flush), 500 items +1 then -1 (the data as it was at the end), after one untimed pass
  (the first update of a full page is not HOT); "without" disables the trigger meanwhile. Reports ms per update.

The lists of each round's figures are printed; compare them pairwise (the machine's load moves both). Run it on a
bench base nothing else writes to: a disabled trigger is disabled for every session. The standings of the items it
counted on are copied again at the end (what a disabled trigger missed), and bench.search_latency's floor graph,
which the application does not keep, is dropped in both modes' rolled-back transactions. Rolled-back rows leave
dead entries in the indexes: the base is vacuumed at the end.
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")

from bench.machine import describe  # noqa: E402

BATCH = 300
COUNTED = 500


def vector_writes(cursor, *, index: str, rounds: int, batch: int = BATCH) -> dict[str, list[float]]:
    """ms per item of the worker's vector UPDATE, with `index` and with it dropped (each round rolled back)."""
    from django.db import transaction

    cursor.execute("SELECT count(*) FROM pg_indexes WHERE indexname = %s", [index])
    if not cursor.fetchone()[0]:
        raise SystemExit(f"no index {index}")
    cursor.execute("SELECT id FROM knowledge_knowledge WHERE embedding IS NOT NULL ORDER BY id DESC LIMIT %s", [batch])
    sources = [row[0] for row in cursor.fetchall()]
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # as below
    found: dict[str, list[float]] = {"with": [], "without": []}
    for number in range(rounds):
        for mode in ("with", "without") if number % 2 == 0 else ("without", "with"):
            with transaction.atomic():
                cursor.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE %s", ["bench\\_floor\\_%"])
                for (floor,) in cursor.fetchall():
                    cursor.execute(f'DROP INDEX "{floor}"')
                if mode == "without":
                    cursor.execute(f'DROP INDEX "{index}"')
                cursor.execute("SELECT id FROM knowledge_knowledge WHERE embedding IS NOT NULL ORDER BY id OFFSET %s "
                               "LIMIT %s", [batch * (2 * number + (mode == "without")), batch])
                targets = [row[0] for row in cursor.fetchall()]
                started = time.perf_counter()
                cursor.execute("UPDATE knowledge_knowledge k SET embedding = s.embedding "
                               "FROM unnest(%s::text[], %s::text[]) AS pair(target, source) "
                               "JOIN knowledge_knowledge s ON s.id = pair.source WHERE k.id = pair.target",
                               [targets, sources[: len(targets)]])
                elapsed = time.perf_counter() - started
                transaction.set_rollback(True)
            found[mode].append(elapsed / max(1, len(targets)) * 1000)
    return found


def counter_updates(cursor, *, trigger: str, rounds: int, count: int = COUNTED) -> dict[str, list[float]]:
    """ms per committed helpful-count UPDATE, with `trigger` enabled and disabled."""
    from django.db.models import OuterRef, Subquery

    from knowledge.models import Knowledge, Standing
    from knowledge.quality import QUALITY

    cursor.execute("SELECT count(*) FROM pg_trigger WHERE tgname = %s", [trigger])
    if not cursor.fetchone()[0]:
        raise SystemExit(f"no trigger {trigger}")
    cursor.execute("SET synchronous_commit = off")
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # inside a caller's transaction (a test's): ALTER TABLE refuses
    # pending foreign key checks
    cursor.execute("SELECT id FROM knowledge_knowledge ORDER BY id LIMIT %s", [count])
    ids = [row[0] for row in cursor.fetchall()]
    update = "UPDATE knowledge_knowledge SET helpful = helpful + %s WHERE id = %s RETURNING helpful, harmful"
    for step in (1, -1):
        for item_id in ids:
            cursor.execute(update, [step, item_id])
    found: dict[str, list[float]] = {"with": [], "without": []}
    try:
        for number in range(rounds):
            for mode in ("with", "without") if number % 2 == 0 else ("without", "with"):
                cursor.execute(f'ALTER TABLE knowledge_knowledge {"ENABLE" if mode == "with" else "DISABLE"} TRIGGER "{trigger}"')
                started = time.perf_counter()
                for step in (1, -1):
                    for item_id in ids:
                        cursor.execute(update, [step, item_id])
                found[mode].append((time.perf_counter() - started) / (2 * len(ids)) * 1000)
    finally:
        cursor.execute(f'ALTER TABLE knowledge_knowledge ENABLE TRIGGER "{trigger}"')
        cursor.execute("RESET synchronous_commit")
        if trigger == "knowhub_standing_update":  # what it missed while disabled (an interrupted round)
            item = Knowledge.objects.filter(pk=OuterRef("pk"))
            Standing.objects.filter(pk__in=ids).update(quality=Subquery(item.values(quality=QUALITY)),
                                                       helpful=Subquery(item.values("helpful")))
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000, help="the seeded base (knowhub_seed_<items>)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--index", help="an index on the items: the vector write's cost with and without it")
    what.add_argument("--trigger", help="a row trigger on the items: a counter update's cost with and without it")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    from bench.retrieval import _point_at_bench_database

    _point_at_bench_database(f"knowhub_seed_{args.items}")
    import django

    django.setup()
    from django.db import connection

    print(describe())
    with connection.cursor() as cursor:
        if args.index:
            found = vector_writes(cursor, index=args.index, rounds=args.rounds)
            unit = "ms per item written with a vector"
        else:
            found = counter_updates(cursor, trigger=args.trigger, rounds=args.rounds)
            unit = "ms per committed counter update"
    with connection.cursor() as cursor:
        cursor.execute("VACUUM knowledge_knowledge")
    for mode, values in found.items():
        print(f"{mode:8s} {' / '.join(f'{value:.2f}' for value in values)}  (median {statistics.median(values):.2f}) {unit}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
