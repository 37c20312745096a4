"""Filtered vector search: recall and latency of the strategies pgvector offers.

    .venv/bin/python -m bench.filtered_vector [--items 50000] [--dims 64]

Synthetic items (random unit vectors) in a `bench:filtered` scope, a filter
that keeps a given share of them, and 50 queries. For each share it reports
recall@10 against the exact answer and ms/query for: the plain HNSW scan
(filter applied after ef_search rows), pgvector 0.8's iterative scan
(relaxed_order, what knowledge.search.vector uses) and an exact scan.
"""
import argparse
import time

import numpy as np

from bench.retrieval import _point_at_bench_database

MODEL = "bench-synthetic"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--dims", type=int, default=64)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args(argv)
    _point_at_bench_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.db import connection, transaction

    from knowledge.models import Knowledge
    from knowledge.search.vector import distance_expression, ensure_index, vector_candidates

    model = f"{MODEL}-{args.dims}"
    rng = np.random.default_rng(0)
    existing = Knowledge.objects.filter(embedding_model=model).count()
    if existing != args.items:
        Knowledge.objects.filter(embedding_model=model).delete()
        vectors = rng.normal(size=(args.items, args.dims))
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        rows = [
            Knowledge(
                id=f"knowledge-20000101-f{i:07d}", types=["tool"], task="synthetic", content="synthetic", owner="bench",
                scopes=["bench:filtered"], tags={"bucket": str(i % 1000)}, embedding=v.tolist(), embedding_model=model,
            )
            for i, v in enumerate(vectors)
        ]
        Knowledge.objects.bulk_create(rows, batch_size=2000)
        started = time.monotonic()
        ensure_index(model, args.dims)
        print(f"built HNSW over {args.items} x {args.dims} in {time.monotonic() - started:.0f}s")
    else:
        ensure_index(model, args.dims)

    queries = np.random.default_rng(1).normal(size=(args.queries, args.dims))  # independent of the items
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    print("| share kept | strategy | recall@10 | ms/query |")
    print("|---|---|---|---|")
    for buckets, label in ((1000, "100%"), (100, "10%"), (10, "1%"), (1, "0.1%")):
        keep = [str(b) for b in range(buckets)]
        qs = Knowledge.objects.filter(embedding_model=model, script="")  # script '' (bulk_create leaves it unset): its graph
        qs = qs.filter(tags__bucket__in=keep) if buckets < 1000 else qs
        results = {}
        for strategy in ("exact", "plain HNSW", "iterative (ours)"):
            found, started = [], time.monotonic()
            for q in queries:
                if strategy == "iterative (ours)":
                    ids = [i for i, _ in vector_candidates(qs, vector=q, model_name=model, dimensions=args.dims, limit=10)]
                else:
                    ordered = qs.annotate(d=distance_expression(q.tolist(), args.dims)).order_by("d").values_list("id", flat=True)[:10]
                    with transaction.atomic(), connection.cursor() as cursor:
                        if strategy == "exact":
                            cursor.execute("SET LOCAL enable_indexscan = off")
                        else:
                            cursor.execute("SET LOCAL hnsw.ef_search = 64")
                            cursor.execute("SET LOCAL hnsw.iterative_scan = off")
                        ids = list(ordered)
                found.append(ids)
            results[strategy] = (found, 1000 * (time.monotonic() - started) / len(queries))
        truth = results["exact"][0]
        for strategy, (found, ms) in results.items():
            recall = np.mean([len(set(f) & set(t)) / max(len(t), 1) for f, t in zip(found, truth)])
            print(f"| {label} | {strategy} | {recall:.3f} | {ms:.1f} |", flush=True)


if __name__ == "__main__":
    main()
