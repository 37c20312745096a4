"""Server time of the curation UI's pages at scale (issue 14: list and detail pages in ≤ 50 ms at 100k items).

    .venv/bin/python -m bench.ui_pages --items 10000[,100000] [--renders 30] [--profile] [--explain]

For each size it opens the database bench/seed_data.py fills (seeding it first if needed) and renders each
page through Django's test Client in-process, signed in as a curator: the whole request (middleware,
session, permissions, queries, template) without the network. Per page: p50 / p95 of `--renders`
renders after a few to warm up, the p50 of this process's CPU time per render (the wall clock of a
shared machine includes waiting for a core; the database's work is not in it), the number of
queries one render runs and their time.

The pages: the knowledge list (first page, a later page, one team's scope: 10% of the items, sorted
by quality), a text search (real questions, a different one per render, their vectors given as in
bench/search_latency.py: the model's time is left out), the page of an item with REPORTS feedback
cases, the page of all its reports, the dashboard, and its ranking panel (the htmx request the dashboard makes once
loaded); and the Django admin's knowledge list (as it opens, searched for one word, sorted by quality) and the
admin's page of the item with REPORTS reports.

The seed has counters but no histories, so the first run on a database adds what the pages read: each
seed item's helpful and harmful reports as rows matching its counters (about 1.7 per item) over its
lifetime, judged searches (one per 20 items, the last 30 days), and one item in its own scope
`bench-ui` (no seed search sees it) with REPORTS reports, VERSIONS versions and two resources.

The text search runs its statements on the search lanes a web process keeps (`--lanes 2`, as `make run`
serves the pages; `--lanes 0`: one after the other, as this bench measured before 2026-12-07).

`--profile` prints a cProfile of the slowest page's renders; `--explain` prints EXPLAIN (ANALYZE,
BUFFERS) of each page's slowest query.
"""
import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")

from bench.machine import describe  # noqa: E402
from bench.search_latency import give_vectors, percentiles, query_vectors, questions, timed  # noqa: E402

SCOPE = "bench-ui"
MESSAGE_ID = "bench-ui-reported"
REPORTS = 5_000
VERSIONS = 60
CURATOR = "bench-ui-curator"
RENDERS = 30
ADMIN_WORDS = ["protein", "cells", "patients", "risk", "北京", "公司"]  # one word each, as a curator searches the admin


def pages(item_id: str, texts: list[str]) -> dict[str, list[str]]:
    """Each page's label and the URLs its renders cycle through."""
    return {
        "knowledge list, first page": ["/knowledge/"],
        "knowledge list, page 50": ["/knowledge/?page=50"],
        "knowledge list, one team's scope (10%)": ["/knowledge/?scopes=team:3"],
        "knowledge list, sorted by quality": ["/knowledge/?sort=quality"],
        "knowledge list, text search": [f"/knowledge/?q={quote(text)}" for text in texts],
        "knowledge list, text search, htmx partial": [f"/knowledge/?q={quote(text)}&hx=1" for text in texts],
        f"item with {REPORTS:,} reports": [f"/knowledge/{item_id}/"],
        "its reports, page 40": [f"/knowledge/{item_id}/reports/helpful/?page=40"],
        "dashboard": ["/"],
        "dashboard's ranking panel (htmx, after the page)": ["/ranking/?hx=1"],
        "admin: knowledge list": ["/admin/knowledge/knowledge/"],
        "admin: knowledge list, searched": [f"/admin/knowledge/knowledge/?q={word}" for word in ADMIN_WORDS],
        "admin: knowledge list, sorted by quality": ["/admin/knowledge/knowledge/?o=-7"],
        f"admin: item with {REPORTS:,} reports": [f"/admin/knowledge/knowledge/{item_id}/change/"],
    }


def prepare() -> str:
    """The histories the pages read (added once per database); returns the id of the much-reported item."""
    from django.db import connection, transaction

    from agents.caller import Caller
    from knowledge import services
    from knowledge.models import FeedbackCase, Knowledge, KnowledgeVersion
    from resources.models import Resource

    found = Knowledge.objects.filter(message_id=MESSAGE_ID).values_list("id", flat=True).first()
    if found:
        return found
    started = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        for kind in ("helpful", "harmful"):  # each seed item's counters as rows, at random moments of its life
            cursor.execute(f"""
                INSERT INTO knowledge_feedbackcase (knowledge_id, kind, "case", reported_by, created_at)
                SELECT k.id, %s, jsonb_build_object('note', 'bench report ' || n), 'agent:bench-' || (n %% 37),
                       k.created_at + random() * (now() - k.created_at)
                FROM knowledge_knowledge k, generate_series(1, k.{kind}) AS n
                WHERE k.scopes @> ARRAY['seed']::varchar[]""", [kind])
        _judged_searches()
        resources = [Resource.objects.get_or_create(id=f"bench-ui/tool-{n}", defaults={
            "title": f"bench tool {n}", "scopes": [SCOPE], "secure_body": "s3cret", "content_type": "credential"})[0].id
            for n in range(2)]
        item = services.knowledge_create(
            Caller.system("bench"), task="Retry a flaky HTTP call with backoff",
            content="Retry with exponential backoff and jitter; give up after five attempts.", types=["strategy"],
            scopes=[SCOPE], message_id=MESSAGE_ID, resource_ids=resources, embed=False)
        FeedbackCase.objects.bulk_create(
            FeedbackCase(knowledge=item, kind="helpful" if n % 5 else "harmful", reported_by=f"agent:bench-{n % 37}",
                         case={"note": f"report {n}", "task": "call the flaky API"}) for n in range(REPORTS))
        Knowledge.objects.filter(pk=item.pk).update(helpful=REPORTS - REPORTS // 5, harmful=REPORTS // 5)
        KnowledgeVersion.objects.bulk_create(
            KnowledgeVersion(knowledge=item, number=n, task=item.task, content=f"{item.content} (draft {n})",
                             changed_by="agent:bench", reason=f"edit {n}") for n in range(1, VERSIONS + 1))
    with connection.cursor() as cursor:
        for table in ("knowledge_feedbackcase", "knowledge_searchlog", "knowledge_knowledge"):
            # VACUUM sets the visibility map, for index-only scans (not possible inside a transaction: a test's)
            cursor.execute(f"{'ANALYZE' if connection.in_atomic_block else 'VACUUM ANALYZE'} {table}")
    print(f"added the pages' histories in {time.monotonic() - started:.0f}s", file=sys.stderr)
    return item.id


def _judged_searches() -> None:
    """One logged search per 20 seed items over the last 30 days, five results each, one of them reported helpful."""
    from datetime import timedelta

    import numpy as np
    from django.utils import timezone

    from knowledge.models import FeedbackCase, Knowledge, SearchLog

    ids = list(Knowledge.objects.filter(scopes__contains=["seed"]).order_by("id").values_list("id", flat=True))
    rng, now = np.random.default_rng(14), timezone.now()
    logs = [SearchLog(created_at=now - timedelta(seconds=int(rng.integers(30 * 86_400))), principal="agent:bench",
                      scopes=["seed"], query=f"bench question {n}", parameters={"top_k": 5, "min_score": 3, "rank": "quality"},
                      result_ids=[ids[i] for i in rng.choice(len(ids), size=5, replace=False)])
            for n in range(len(ids) // 20)]
    SearchLog.objects.bulk_create(logs, batch_size=2_000)
    FeedbackCase.objects.bulk_create(
        [FeedbackCase(knowledge_id=log.result_ids[int(rng.integers(5))], kind="helpful", search=log, reported_by="agent:bench",
                      created_at=log.created_at + timedelta(minutes=1)) for log in logs], batch_size=2_000)


def signed_in_client():
    """A test Client signed in as a curator (made once per database)."""
    from django.contrib.auth.models import Group, User
    from django.test import Client

    user, made = User.objects.get_or_create(username=CURATOR)
    if made:
        user.groups.add(Group.objects.get(name="curator"))
    if not user.is_staff:  # the Django admin's pages too
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    client = Client()
    client.force_login(user)
    return client


def render(client, url: str):
    """One render; `hx=1` (the URL's last parameter) asks for the htmx partial as a live search or a panel loaded
    after its page does."""
    htmx = url.endswith(("&hx=1", "?hx=1"))
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client.get(url.removesuffix("hx=1").rstrip("?&") if htmx else url, **headers)
    if response.status_code != 200:
        raise SystemExit(f"{url}: {response.status_code}")
    return response


def rendering():
    """The test Client's host allowed, and static URLs as in tests, without collectstatic's manifest (a dictionary
    lookup per URL is all that leaves out)."""
    from django.conf import settings
    from django.test import override_settings

    return override_settings(ALLOWED_HOSTS=[*settings.ALLOWED_HOSTS, "testserver"], STORAGES={
        **settings.STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}})


def measure(items: int, *, renders: int, profile: bool, explain: bool) -> list[dict]:
    with rendering():
        return _measure(items, renders=renders, profile=profile, explain=explain)


def _measure(items: int, *, renders: int, profile: bool, explain: bool) -> list[dict]:
    import logging

    request_log = logging.getLogger("knowhub.request")
    level = request_log.level
    request_log.setLevel(logging.WARNING)  # a log line per render is noise here
    try:
        return _measure_pages(items, renders=renders, profile=profile, explain=explain)
    finally:
        request_log.setLevel(level)  # as it was: this runs inside the test suite too


def _measure_pages(items: int, *, renders: int, profile: bool, explain: bool) -> list[dict]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from knowledge.search.embeddings import get_embedder

    item_id = prepare()
    texts = questions(renders)
    give_vectors(embedder := get_embedder(), query_vectors(texts, embedder))
    client = signed_in_client()
    rows = []
    for label, urls in pages(item_id, texts).items():
        inputs = [urls[i % len(urls)] for i in range(renders)]
        samples, cpu = timed_with_cpu(lambda url: render(client, url), inputs)
        with CaptureQueriesContext(connection) as captured:
            render(client, inputs[0])
        queries = [(float(q["time"]) * 1000, q["sql"]) for q in captured.captured_queries]
        rows.append({"items": items, "page": label, "ms": percentiles(samples), "cpu_ms": percentiles(cpu)[0],
                     "queries": len(queries),
                     "sql_ms": sum(ms for ms, _ in queries), "slowest": max(queries, default=(0.0, ""))})
        _print_row(rows[-1])
        if explain and queries:
            _explain(label, rows[-1]["slowest"])
    if profile:
        slowest = max(rows, key=lambda row: row["ms"][0])
        _profile(client, pages(item_id, texts)[slowest["page"]], label=slowest["page"])
    return rows


def timed_with_cpu(run, inputs) -> tuple[list[float], list[float]]:
    """search_latency.timed's wall-clock samples, and this process's CPU time for each: on a shared machine the
    wall clock includes waiting for a core, the CPU time does not (the database server's work is not in it)."""
    cpu = []

    def run_counted(value):
        started = time.process_time()
        run(value)
        cpu.append(time.process_time() - started)

    wall = timed(run_counted, inputs)
    return wall, cpu[-len(inputs):]


def _explain(label: str, slowest: tuple[float, str]) -> None:
    from django.db import connection

    ms, sql = slowest
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
        plan = "\n".join(f"    {line}" for (line,) in cursor.fetchall())
    print(f"\n{label}: slowest query {ms:.1f} ms\n    {sql[:300]}\n{plan}\n", file=sys.stderr)


def _profile(client, urls: list[str], *, label: str) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    for url in urls * max(1, 10 // len(urls)):
        render(client, url)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
    print(f"\ncProfile of {label}:\n{out.getvalue()}", file=sys.stderr)


HEADER = ("| items | page | p50 ms | p95 ms | Python CPU p50 ms | queries | their time, ms (one render) |\n"
          "|---|---|---|---|---|---|---|")


def _print_row(row: dict) -> None:
    p50, p95, _ = row["ms"]
    print(f"| {row['items']:,} | {row['page']} | {p50:.1f} | {p95:.1f} | {row['cpu_ms']:.1f} | {row['queries']} "
          f"| {row['sql_ms']:.1f} |", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", default="10000", help="comma-separated sizes, each its own seeded database")
    parser.add_argument("--renders", type=int, default=RENDERS)
    parser.add_argument("--profile", action="store_true", help="cProfile the slowest page")
    parser.add_argument("--explain", action="store_true", help="EXPLAIN (ANALYZE, BUFFERS) each page's slowest query")
    parser.add_argument("--lanes", type=int, default=2,
                        help="settings.KNOWHUB_SEARCH_LANES: 2 as a web process serves the pages (the default), 0: a "
                             "text search's statements one after the other")
    parser.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.items.split(",")]
    if len(sizes) > 1:  # one process per database: Django binds its settings once
        import subprocess

        print(f"{describe()}\n\n{HEADER}", flush=True)
        for size in sizes:
            extra = [flag for flag, on in (("--profile", args.profile), ("--explain", args.explain)) if on]
            extra += ["--lanes", str(args.lanes)]
            subprocess.run([sys.executable, "-m", "bench.ui_pages", "--items", str(size), "--renders", str(args.renders),
                            "--no-header", *extra], check=True, cwd=ROOT)
        return 0
    return _one(sizes[0], args)


def _one(items: int, args) -> int:
    from bench.seed_data import open_database, seed

    open_database(items)
    seed(items)
    from django.conf import settings

    settings.KNOWHUB_SEARCH_LANES = args.lanes  # as wsgi.py sets it for a web process
    if not args.no_header:
        print(f"{describe()}\n\n{HEADER}", flush=True)
    measure(items, renders=args.renders, profile=args.profile, explain=args.explain)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
