"""CPU per REST request, in-process: the request path's own cost without a server or a load generator.

    .venv/bin/python -m bench.request_cpu                          # 300 of each, CPU ms and queries per request
    .venv/bin/python -m bench.request_cpu --ops search-repeated --profile 25   # and the top 25 of a cProfile

Each request goes through Django's own WSGI handler (`knowhub_site.wsgi` minus gunicorn: every
middleware, the request signals that return the pooled connection, DRF, the filter chain, the request
log) with a real agent token, against the database `knowhub_reqfloor` on the embedded server (migrated,
its own scope `bench:request_cpu`; never the seed databases). The web process's settings are used as
`make run` serves them: the connection pool on, metrics in a multiprocess directory.

Reported per operation: this process's CPU per request (`time.process_time`), the database server's CPU
per request (every process of the server's, read from /proc: its backends, WAL writer and checkpointer;
on a busy machine other databases' work would count too, hence "—" when the server is not local),
wall time per request, and SQL statements per request. Operations:

- search-repeated  GET /api/knowledge/search on 8 fixed questions, answered from the result cache
- get              GET /api/knowledge/{id}
- missing          GET /api/knowledge/{id} of an id that does not exist (404: the floor of the path)
- feedback         PUT /api/knowledge/{id} with add_helpful_case
- feedback-keyed   the same with a new Idempotency-Key each request, as the Python client sends feedback
- save             POST /api/knowledge (a small item; its embedding task is sent to the database broker)

The machine may be shared: run before/after builds alternately (`--rounds`) and compare medians.
"""
import argparse
import cProfile
import io
import itertools
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")
os.environ.setdefault("KNOWHUB_DB_POOL", "true")  # as wsgi.py sets it for web processes
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="request-cpu-metrics-"))  # as serve.py

from bench.machine import cpu_seconds, parent_pid, process_stat  # noqa: E402

OPS = ["search-repeated", "get", "missing", "feedback", "feedback-keyed", "save"]
RUN, KEYS = uuid.uuid4().hex[:12], itertools.count()  # each Idempotency-Key sent is a new one
DATABASE = "knowhub_reqfloor"
SCOPE = "bench:request_cpu"
AGENT = "bench_request_cpu"
QUESTIONS = ["how do I retry a flaky HTTP call", "postgres connection pool exhausted", "python logging json format",
             "celery task never runs", "django migration conflict", "docker image too large",
             "redis key expiry", "部署失败怎么回滚"]


def environ(method: str, path: str, token: str, body: dict | None = None, key: str | None = None) -> dict:
    """A WSGI environ as gunicorn builds it for a keep-alive client on loopback (`key`: an Idempotency-Key)."""
    path, _, query = path.partition("?")
    data = json.dumps(body).encode() if body is not None else b""
    env = {
        "REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query, "SCRIPT_NAME": "",
        "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1:8000", "HTTP_AUTHORIZATION": f"Bearer {token}", "HTTP_ACCEPT": "*/*",
        "HTTP_CONNECTION": "keep-alive", "HTTP_USER_AGENT": "Python-urllib/3",
        "wsgi.input": io.BytesIO(data), "wsgi.errors": sys.stderr, "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0), "wsgi.multithread": True, "wsgi.multiprocess": True, "wsgi.run_once": False,
    }
    if body is not None:
        env["CONTENT_TYPE"], env["CONTENT_LENGTH"] = "application/json", str(len(data))
    if key:
        env["HTTP_IDEMPOTENCY_KEY"] = key
    return env


def send(app, method: str, path: str, token: str, body: dict | None = None, key: str | None = None) -> tuple[int, bytes]:
    status = []
    result = app(environ(method, path, token, body, key), lambda s, headers, exc_info=None: status.append(s))
    try:
        payload = b"".join(result)
    finally:
        if hasattr(result, "close"):
            result.close()  # request_finished: the connection goes back to the pool
    return int(status[0].split()[0]), payload


def save_body(n: int) -> dict:
    return {"task": f"request_cpu item {n}", "content": f"How to do thing {n}: retry with backoff, then log it.",
            "types": ["strategy"], "tags": {"project": "request_cpu", "n": str(n)}}


def request_for(op: str, n: int, items: list[str]) -> tuple[str, str, dict | None]:
    if op == "search-repeated":
        return "GET", f"/api/knowledge/search?top_k=5&q={quote(QUESTIONS[n % len(QUESTIONS)])}", None
    if op == "get":
        return "GET", f"/api/knowledge/{items[n % len(items)]}", None
    if op == "missing":
        return "GET", "/api/knowledge/knowledge-20000101-zzzz", None
    if op in ("feedback", "feedback-keyed"):
        return "PUT", f"/api/knowledge/{items[n % len(items)]}", {
            "add_helpful_case": {"task": f"request_cpu call {n}", "outcome": "ok"}}
    if op == "save":
        return "POST", "/api/knowledge", save_body(n)
    raise ValueError(op)


EXPECTED = {"search-repeated": 200, "get": 200, "missing": 404, "feedback": 200, "feedback-keyed": 200, "save": 201}


class StatementCount:
    """connection.execute_wrapper: counts the SQL statements sent."""

    def __init__(self):
        self.count = 0

    def __call__(self, execute, sql, params, many, context):
        self.count += 1
        return execute(sql, params, many, context)


def server_cpu_seconds() -> dict[int, float] | None:
    """CPU seconds used so far by each of the database server's processes (the postmaster and its children), by
    pid, or None when the server is not a local process this one can read (a DATABASE_URL elsewhere, no /proc)."""
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]
        postmaster = parent_pid(process_stat(backend))
        used = {}
        for folder in Path("/proc").glob("[0-9]*"):
            try:
                fields = process_stat(folder.name)
            except OSError:
                continue  # the process ended meanwhile
            if parent_pid(fields) == postmaster or int(folder.name) == postmaster:
                used[int(folder.name)] = cpu_seconds(fields)
        return used
    except (OSError, ValueError, IndexError):
        return None


def server_cpu_between(before: dict[int, float] | None, after: dict[int, float] | None) -> float | None:
    """The server's CPU seconds between two readings: each process's growth (one that ended between them is not
    counted, rather than subtracted; one that started counts from zero)."""
    if before is None or after is None:
        return None
    return sum(used - before.get(pid, 0.0) for pid, used in after.items())


def measure(app, op: str, count: int, token: str, items: list[str], profile: cProfile.Profile | None) -> dict:
    from django.db import connection

    statements = StatementCount()
    server = server_cpu_seconds()  # before the count: its statement is not a request's
    wrapped = connection.execute_wrapper(statements)
    wrapped.__enter__()  # on the connection wrapper, not the pooled connection: lasts across requests
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        if profile:
            profile.enable()
        for n in range(count):
            method, path, body = request_for(op, n, items)
            key = f"request_cpu-{RUN}-{next(KEYS)}" if op == "feedback-keyed" else None
            status, payload = send(app, method, path, token, body, key)
            if status != EXPECTED[op]:
                raise RuntimeError(f"{op}: {method} {path} answered {status}: {payload[:300]!r}")
        if profile:
            profile.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        wrapped.__exit__(None, None, None)
    server = server_cpu_between(server, server_cpu_seconds())
    server = None if server is None else server / count * 1000
    return {"op": op, "cpu_ms": cpu / count * 1000, "server_cpu_ms": server, "wall_ms": wall / count * 1000,
            "statements": statements.count / count}


def prepare() -> tuple[str, list[str]]:
    from bench.retrieval import _point_at_bench_database

    _point_at_bench_database(DATABASE)
    import django

    django.setup()
    from django.core.management import call_command

    from agents.models import AgentToken
    from agents.services import agent_token_create

    call_command("migrate", verbosity=0)
    AgentToken.objects.filter(agent_id=AGENT).delete()
    _, raw = agent_token_create(agent_id=AGENT, readable_scopes=[SCOPE], writable_scopes=[SCOPE],
                                name="bench/request_cpu.py")
    return raw


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", default=",".join(OPS), help=f"some of {','.join(OPS)}")
    parser.add_argument("--requests", type=int, default=300, help="per operation and round")
    parser.add_argument("--rounds", type=int, default=3, help="each operation this many times; the median is shown")
    parser.add_argument("--profile", type=int, default=0, help="print the top N functions of a cProfile by own time")
    parser.add_argument("--json", action="store_true", help="one JSON object per operation instead of the table")
    args = parser.parse_args(argv)
    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    if set(ops) - set(OPS):
        parser.error(f"unknown --ops; choose from {OPS}")

    token = prepare()
    from django.core.wsgi import get_wsgi_application

    from knowledge.models import Knowledge

    app = get_wsgi_application()
    for n in range(max(0, 20 - Knowledge.objects.filter(scopes__contains=[SCOPE]).count())):
        send(app, "POST", "/api/knowledge", token, save_body(10**6 + n))
    items = list(Knowledge.objects.filter(scopes__contains=[SCOPE]).values_list("id", flat=True)[:20])
    for n in range(len(QUESTIONS)):  # warm: the embedders load, each question's reply is kept
        send(app, *request_for("search-repeated", n, items)[:2], token)

    rows = []
    for op in ops:
        runs = []
        for _ in range(args.rounds):
            if op == "search-repeated":
                for n in range(len(QUESTIONS)):  # a write in an earlier round retired the kept replies
                    send(app, *request_for(op, n, items)[:2], token)
            runs.append(measure(app, op, args.requests, token, items, None))
        row = {"op": op, "requests": args.requests, "rounds": args.rounds,
               **{k: statistics.median(r[k] for r in runs) for k in ("cpu_ms", "wall_ms", "statements")},
               "server_cpu_ms": (statistics.median(r["server_cpu_ms"] for r in runs)
                                 if all(r["server_cpu_ms"] is not None for r in runs) else None)}
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            server = "   —  " if row["server_cpu_ms"] is None else f"{row['server_cpu_ms']:6.2f}"
            print(f"{op:16} CPU {row['cpu_ms']:6.2f} ms/request  PostgreSQL {server} ms  wall {row['wall_ms']:6.2f} ms  "
                  f"SQL {row['statements']:4.1f}/request  (median of {args.rounds} x {args.requests})", flush=True)
        if args.profile:
            profile = cProfile.Profile(time.process_time)  # CPU, not waits on the database
            if op == "search-repeated":
                for n in range(len(QUESTIONS)):
                    send(app, *request_for(op, n, items)[:2], token)
            measure(app, op, args.requests, token, items, profile)
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats(os.environ.get("PROFILE_SORT", "tottime")).print_stats(args.profile)
            print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
