"""Search latency at scale, beside the raw pgvector floor on the same data.

    .venv/bin/python -m bench.search_latency --items 10000,100000 [--queries 100] [--profile] [--statements]

For each size it uses the database bench/seed_data.py fills (seeding it
first if needed) and times, per query, over real questions (CMRC 2018 and
SciFact, half Chinese, half English; their vectors computed once and cached):

- floor: the bare `ORDER BY embedding <=> $1 LIMIT 10` on an HNSW index over
  all the items, which the bench builds for it (with the filter and pgvector's
  iterative scan when filtered);
- engine: `knowledge.search.engine.search` as an agent's search runs it
  (top_k 5, the agent's readable scopes, hybrid, both stages), the query
  vector given, so the model's time is left out;
- unfiltered, with a 10% filter (one team's scope) and a 1% filter (one
  `project` tag);
- filtered recall@10 of the engine's vector retrieval (per writing system,
  `vector.vector_candidates` as crosslingual.py calls it) against an exact
  scan with the same filter.

Each figure is reported as p50/p95/p99 in ms and as a ratio to the floor's
p50 measured in the same run; the second pass also as CPU per search, the
database backend's (on a server on this machine) and Python's, which move
little with the machine's load where wall times do. `--profile` prints a cProfile of
the engine over the unfiltered queries (before they are timed: the timed
passes then find its word statistics and query vectors cached);
`--statements` prints where each filter's first timed pass spent its time,
by kind of SQL statement, and the Python between them. `--walk-tuple-cost`
sets how the vector search chooses between an exact scan and a graph walk
past 2,000 rows (vector.WALK_TUPLE_COST): the comparison behind its value.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")

import numpy as np  # noqa: E402

from bench.datasets import DATA_DIR  # noqa: E402
from bench.machine import cpu_seconds, describe, process_stat  # noqa: E402

READER_SCOPES = ["seed"]
FILTERS = {
    "none": {},
    "10%": {"scopes": ["team:3"]},
    "1%": {"tags": {"project": "p42"}},
}
TOP_K = 5
FLOOR_K = 10
WARMUP = 5


def questions(count: int) -> list[str]:
    """`count` real questions, alternating Chinese (CMRC 2018) and English (SciFact), in file order."""
    lists = []
    for folder in ("cmrc2018-dev-zh", "scifact-beir-en"):
        with open(DATA_DIR / folder / "queries.jsonl", encoding="utf-8") as fh:
            lists.append([json.loads(line)["text"] for line in fh][: count])
    mixed = [q for pair in zip(*lists) for q in pair]
    return mixed[:count]


def query_vectors(texts: list[str], embedder) -> dict[str, np.ndarray]:
    from django.conf import settings

    from bench.embed_cache import cached_matrix

    ids = [f"q{i}" for i in range(len(texts))]
    matrix = cached_matrix(cache_dir=settings.VAR_DIR / "bench-cache", dataset="seed-questions", embedder=embedder,
                           ids=ids, texts=texts, queries=True)
    return dict(zip(texts, matrix))


def give_vectors(embedder, vectors: dict[str, np.ndarray]) -> None:
    """The embedder answers these texts' queries from `vectors` (the model's time left out), any other as before."""
    compute = embedder.__dict__.setdefault("_embed_query_uncached", embedder.embed_query)
    embedder.embed_query = lambda text: vectors[text] if text in vectors else compute(text)


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    p50, p95, p99 = np.percentile(np.asarray(samples) * 1000.0, [50, 95, 99])
    return float(p50), float(p95), float(p99)


def timed(run, inputs) -> list[float]:
    for value in inputs[:WARMUP]:
        run(value)
    samples = []
    for value in inputs:
        started = time.perf_counter()
        run(value)
        samples.append(time.perf_counter() - started)
    return samples


class CpuTimes:
    """CPU time of a pass, per search: the database backend's (read from /proc, so only for a server on this machine,
    as the embedded one is; None otherwise) and this process's. Unlike wall time, it barely moves with what else the
    machine is doing."""

    def __init__(self):
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self.backend = cursor.fetchone()[0]

    def _backend(self) -> float | None:
        try:
            return cpu_seconds(process_stat(self.backend))
        except OSError:  # the server runs elsewhere
            return None

    def measure(self, run, count: int):
        """(result of run(), backend ms per search or None, Python ms per search)."""
        backend, python = self._backend(), time.process_time()
        result = run()
        after = self._backend()
        per = lambda seconds: seconds / count * 1000.0  # noqa: E731
        return result, (None if backend is None or after is None else per(after - backend)), per(time.process_time() - python)


def floor_graph(embedder) -> None:
    """The floor's own HNSW index, over every item of the embedder, built here when missing (the application keeps a
    graph per writing system only: knowledge/search/vector.py); the project's graph settings, with room and parallel
    workers for the build, as seed_data builds the application's."""
    from django.db import connection, transaction

    from bench.seed_data import room_to_build
    from knowledge.search.vector import GRAPH_OPTIONS

    name = floor_index_name(embedder)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [name])
        if cursor.fetchone():
            return
        started = time.monotonic()
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # as vector.ensure_index: CREATE INDEX refuses pending FK checks
        room_to_build(cursor)
        cursor.execute(f"CREATE INDEX {name} ON knowledge_knowledge USING hnsw ((embedding::vector({int(embedder.dimensions)})) "
                       f"vector_cosine_ops) WITH ({GRAPH_OPTIONS}) WHERE embedding_model = %s", [embedder.name])
    print(f"  the floor's HNSW index built in {time.monotonic() - started:.0f}s", file=sys.stderr)


def floor_index_name(embedder) -> str:
    from knowledge.search.vector import index_name

    return "bench_floor_" + index_name(embedder.name, embedder.dimensions).removeprefix("knowledge_hnsw_")


def floor_search(vector, *, embedder, where: str = "", params=(), limit: int = FLOOR_K) -> list[str]:
    """The bare nearest-neighbour query on an HNSW index over all the items (`floor_graph`; iterative scan when a
    filter is added)."""
    from django.db import connection, transaction

    sql = (f"SELECT id FROM knowledge_knowledge WHERE embedding_model = %s {where} "
           f"ORDER BY embedding::vector({embedder.dimensions}) <=> %s::vector LIMIT {limit}")
    with transaction.atomic(), connection.cursor() as cursor:
        if where:
            cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute(sql, [embedder.name, *params, _literal(vector)])
        return [row[0] for row in cursor.fetchall()]


def _literal(vector) -> str:
    return "[" + ",".join(f"{x:.7f}" for x in vector) + "]"


FLOOR_WHERE = {
    "none": ("", ()),
    "10%": ("AND scopes && %s::varchar[]", (["team:3"],)),
    "1%": ("AND tags @> %s::jsonb", (json.dumps({"project": "p42"}),)),
}


def filtered_recall(texts, vectors, *, embedder, label: str) -> tuple[float | None, float | None]:
    """Recall@10 of what the engine retrieves per writing system against an exact scan of the same items with the same
    filter and the same query vector: each group searched as crosslingual.py searches it (the query weighted for the
    pair of scripts, e5's own graph within the query's script, the engine's list length and group count). Returned
    apart: the groups in the query's own script, and the others (a query in another language)."""
    from knowledge.search import crosslingual, engine
    from knowledge.search.text import script_of
    from knowledge.search.vector import distance_expression, vector_candidates

    base = engine.narrowed(engine.visible(readable_scopes=READER_SCOPES), **FILTERS[label])
    counts = crosslingual.scripts_present(base, model_name=embedder.name)
    found, total = {True: 0, False: 0}, {True: 0, False: 0}
    for text in texts:
        query_script = script_of(text)
        for script in (s for s in counts if s):
            own = script == query_script
            weights = crosslingual.pair_weights(embedder, same_script=own)
            vector = crosslingual.query_vector_for(embedder, vectors[text], weights)
            group = base.filter(script=script)
            size, graph = crosslingual.scan_size(base, script, counts[script], model_name=embedder.name, limit=engine.POOL)
            got = [i for i, _ in vector_candidates(group, vector=vector, model_name=embedder.name, dimensions=embedder.dimensions,
                                                   limit=engine.POOL, size=size, total=graph,
                                                   alone=crosslingual.alone_in(weights))][:FLOOR_K]
            exact = set(
                group.filter(embedding_model=embedder.name)
                .annotate(d=distance_expression(list(map(float, vector)), embedder.dimensions) + 0.0)
                .order_by("d", "id").values_list("id", flat=True)[:FLOOR_K]
            )
            found[own] += len(set(got) & exact)
            total[own] += len(exact)
    return tuple(found[own] / total[own] if total[own] else None for own in (True, False))  # None: no such group


# Where `--statements` files each SQL statement the engine sends: the first kind whose text it contains.
STATEMENT_KINDS = (
    ("candidates' cosines (stage 2)", "THEN 1 - (subvector("),
    ("vector search (HNSW or exact)", "<=>"),
    ("scripts present", "AS hits"),
    ("search generation (scripts present's counts kept under it)", "knowhub_search_generation"),
    ("BM25 scoring", "SUM(q.idf"),
    ("word statistics: the base's first pass", "count(*) FILTER"),
    ("word statistics: a new word's holders", "AS held"),
    ("word statistics: ANALYZE's shares", "pg_stats"),
    ("query lexemes", "tsvector_to_array"),
    ("scan settings (SET LOCAL)", "SET "),
    ("candidate rows", "knowledge_knowledge"),
)


class StatementTimes:
    """Time and count of the engine's SQL statements by kind (a Django execute wrapper)."""

    def __init__(self):
        self.seconds, self.calls = {}, {}

    def __call__(self, execute, sql, params, many, context):
        kind = next((label for label, mark in STATEMENT_KINDS if mark in sql), "other")
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds[kind] = self.seconds.get(kind, 0.0) + time.perf_counter() - started
            self.calls[kind] = self.calls.get(kind, 0) + 1

    def report(self, label: str, searches: int, wall: float) -> str:
        lines = [f"\n{label}: {wall / searches * 1000:.1f} ms a search, by statement (first pass)\n",
                 "| statement | per search | ms per search |", "|---|---|---|"]
        for kind, seconds in sorted(self.seconds.items(), key=lambda pair: -pair[1]):
            lines.append(f"| {kind} | {self.calls[kind] / searches:.1f} | {seconds / searches * 1000:.1f} |")
        rest = wall - sum(self.seconds.values())
        lines.append(f"| Python and the rest (no statement running) | | {rest / searches * 1000:.1f} |")
        return "\n".join(lines)


def measure(items: int, *, count: int, profile: bool, statements: bool = False, filters=tuple(FILTERS)) -> list[dict]:
    from knowledge.search import engine
    from knowledge.search.embeddings import get_embedder
    from knowledge.search.warmup import warm_up

    warm_up()  # as a web process does before its first request: the first pass then times searches, not loading
    embedder = get_embedder()
    texts = questions(count)
    vectors = query_vectors(texts, embedder)
    give_vectors(embedder, vectors)
    floor_graph(embedder)
    rows = []
    for label, narrowing in ((label, FILTERS[label]) for label in filters):
        where, params = FLOOR_WHERE[label]
        floor = timed(lambda t: floor_search(vectors[t], embedder=embedder, where=where, params=params), texts)
        run = lambda t: engine.search(query=t, top_k=TOP_K, readable_scopes=READER_SCOPES, **narrowing)  # noqa: E731
        if profile and label == "none":
            _profile(run, texts)
        if statements:
            from django.db import connection

            times, started = StatementTimes(), time.perf_counter()
            with connection.execute_wrapper(times):
                searched = timed(run, texts)
            report = times.report(f"{items:,} items, filter {label}", len(texts) + WARMUP, time.perf_counter() - started)
        else:
            searched = timed(run, texts)
        # the same questions again: word statistics and plans cached; its CPU per search is the table's CPU column
        again, backend_cpu, python_cpu = CpuTimes().measure(lambda: timed(run, texts), len(texts) + WARMUP)
        recall = filtered_recall(texts[:50], vectors, embedder=embedder, label=label)
        rows.append({"items": items, "filter": label, "floor": percentiles(floor), "engine": percentiles(searched), "again": percentiles(again),
                     "recall": recall, "cpu": (backend_cpu, python_cpu)})
        _print_row(rows[-1])
        if statements:
            print(report, file=sys.stderr)
    return rows


def _profile(run, texts) -> None:
    """cProfile (the standard library's: nothing to install) of the engine over `texts`, the 30 functions of most
    cumulative time (PROFILE_SORT=tottime: of most own time). A profiled pass fills the word statistics and query
    caches: the timed passes then start warm."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for text in texts:
        run(text)
    profiler.disable()
    pstats.Stats(profiler, stream=sys.stderr).sort_stats(os.environ.get("PROFILE_SORT", "cumulative")).print_stats(30)


HEADER = ("| items | filter | floor p50 / p95 / p99 ms | engine p50 / p95 / p99 ms | engine p50 ÷ floor p50 "
          "| engine, same questions again, p50 / p95 | CPU per search again, PostgreSQL / Python ms "
          "| vector recall@10 vs exact, query's script / others |\n|---|---|---|---|---|---|---|---|")


def _print_row(row: dict) -> None:
    floor, searched = row["floor"], row["engine"]
    print(f"| {row['items']:,} | {row['filter']} | {floor[0]:.1f} / {floor[1]:.1f} / {floor[2]:.1f} "
          f"| {searched[0]:.1f} / {searched[1]:.1f} / {searched[2]:.1f} | {searched[0] / max(floor[0], 1e-9):.1f}× "
          f"| {row['again'][0]:.1f} / {row['again'][1]:.1f} | {_cpu(row['cpu'])} | {' / '.join('n/a' if r is None else f'{r:.3f}' for r in row['recall'])} |", flush=True)


def _cpu(cpu: tuple[float | None, float]) -> str:
    backend, python = cpu
    return f"{'n/a' if backend is None else f'{backend:.1f}'} / {python:.1f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", default="10000", help="comma-separated sizes, each its own seeded database")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--statements", action="store_true",
                        help="print, per filter, the first pass's time by kind of SQL statement and the Python between")
    parser.add_argument("--filters", default=",".join(FILTERS), help=f"comma-separated, of {', '.join(FILTERS)}".replace("%", "%%"))
    parser.add_argument("--walk-tuple-cost", type=float,
                        help="vector.WALK_TUPLE_COST for this run (0: past 2,000 rows always the walk; 1000: the exact scan)")
    parser.add_argument("--lanes", type=int, default=2,
                        help="settings.KNOWHUB_SEARCH_LANES: 2 as a web process runs (the default), 0: a search's "
                             "statements one after the other (--statements and the backend's CPU see only this thread's)")
    parser.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if unknown := set(args.filters.split(",")) - set(FILTERS):
        parser.error(f"--filters: unknown {', '.join(sorted(unknown))}")
    sizes = [int(s) for s in args.items.split(",")]
    if len(sizes) > 1:  # one process per database: Django binds its settings once
        import subprocess

        print(HEADER, flush=True)
        for size in sizes:
            extra = ["--profile"] * args.profile + ["--statements"] * args.statements
            if args.walk_tuple_cost is not None:
                extra += ["--walk-tuple-cost", str(args.walk_tuple_cost)]
            extra += ["--filters", args.filters, "--lanes", str(args.lanes)]
            subprocess.run([sys.executable, "-m", "bench.search_latency", "--items", str(size), "--queries",
                            str(args.queries), "--no-header", *extra], check=True, cwd=ROOT)
        return 0
    return _one(sizes[0], args)


def _one(items: int, args) -> int:
    from bench.seed_data import open_database, seed

    open_database(items)
    seed(items)
    from django.conf import settings

    settings.KNOWHUB_SEARCH_LANES = args.lanes
    if args.walk_tuple_cost is not None:
        from knowledge.search import vector

        vector.WALK_TUPLE_COST = args.walk_tuple_cost
    if not args.no_header:
        print(f"{describe()}\n")
        print(HEADER, flush=True)
    measure(items, count=args.queries, profile=args.profile, statements=args.statements, filters=args.filters.split(","))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
