"""Memory per process of the stack `make run` starts: RSS, USS and PSS of each KnowHub process, and the total.

    .venv/bin/python bench/memory.py --web 4 --workers 2        # the shape issue 18 sizes for
    .venv/bin/python bench/memory.py --web 1 --workers 1 --saves 2 --searches 2   # quick

It runs `manage.py serve --web-workers W --worker-concurrency C` in a fresh
temporary var/ (its own embedded PostgreSQL, a free port), waits for /healthz,
then warms every process the way use does: saves over HTTP (the worker's pool
children embed them) and searches on new connections (each web process segments
and embeds a query), waits for the vectors, and measures every process under
`serve` (psutil `memory_full_info`). PSS shares each shared page among the
processes that map it, so the PSS total is what the stack costs the machine;
USS is what a process alone holds (freed when it exits). PostgreSQL is listed
apart: it is the database, not what this bench sizes.
"""
import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import describe  # noqa: E402

MiB = 2**20
TEXTS = [
    ("Retry flaky HTTP calls", "Retry with exponential backoff and jitter; give up after five attempts."),
    ("重试不稳定的 HTTP 请求", "使用指数退避和随机抖动重试，五次之后放弃。"),
    ("Code style of this user", "The user prefers tabs over spaces and type hints everywhere."),
    ("这个用户的代码风格", "用户喜欢用制表符而不是空格，并且到处写类型注解。"),
]
QUERIES = ["how should I retry failing requests", "用户喜欢什么缩进", "exponential backoff", "类型注解"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http(base: str, method: str, path: str, body=None, token: str | None = None, timeout: float = 60):
    """(status, JSON or None) on a connection of its own, so gunicorn spreads the requests over its workers."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError):
        return None, None


def wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := condition():
            return result
        time.sleep(1)
    raise RuntimeError(f"timed out waiting for {what}")


def role_of(proc: psutil.Process, serve_pid: int) -> str:
    """What a process under `serve` is, from its command line and parent."""
    cmd = " ".join(proc.cmdline())
    parent = proc.ppid()
    if proc.pid == serve_pid:
        return "serve (supervisor)"
    if "postgres" in proc.name() or "postgres" in cmd.split(" ")[0]:
        return "postgres"
    if "gunicorn" in cmd and "knowhub_site.asgi" in cmd:  # the MCP server's own gunicorn
        return "MCP gunicorn master" if parent == serve_pid else "MCP process"
    if "gunicorn" in cmd:
        return "gunicorn master" if parent == serve_pid else "web process"
    if "celery" in cmd:
        if parent == serve_pid:
            return "celery worker (main)"
        # the embedded beat is a forked child like the pool children, with the same command line
        return "celery child (pool or beat)"
    if "model_service" in cmd:
        return "model service"
    return proc.name()


def measure(serve_pid: int) -> list[dict]:
    serve = psutil.Process(serve_pid)
    rows = []
    for proc in [serve, *serve.children(recursive=True)]:
        try:
            info = proc.memory_full_info()
            rows.append({"pid": proc.pid, "role": role_of(proc, serve_pid),
                         "rss": info.rss / MiB, "uss": info.uss / MiB, "pss": info.pss / MiB})
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    order = ["serve (supervisor)", "model service", "gunicorn master", "web process", "MCP gunicorn master",
             "MCP process", "celery worker (main)", "celery child (pool or beat)"]
    return sorted(rows, key=lambda r: (order.index(r["role"]) if r["role"] in order else len(order), r["pid"]))


def warm(base: str, token: str, saves: int, searches: int, web: int) -> None:
    with ThreadPoolExecutor(max(2, web)) as pool:
        bodies = [{"task": f"{TEXTS[n % len(TEXTS)][0]} #{n}", "content": TEXTS[n % len(TEXTS)][1], "types": ["strategy"]}
                  for n in range(saves)]
        saved = list(pool.map(lambda body: http(base, "POST", "/api/knowledge", body, token), bodies))
        ids = [reply["id"] for status, reply in saved if status == 201]
        if len(ids) != saves:
            raise RuntimeError(f"saves failed: {[status for status, _ in saved]}")

        def embedded():
            return all(http(base, "GET", f"/api/knowledge/{i}", token=token)[1]["vector_status"] == "ready" for i in ids)

        wait(embedded, 180, "the worker to embed the saves")
        replies = list(pool.map(lambda n: http(base, "GET", f"/api/knowledge/search?top_k=5&q={quote(QUERIES[n % len(QUERIES)])}"
                                                f"+{n}", token=token), range(searches)))
        if any(status != 200 for status, _ in replies):
            raise RuntimeError(f"searches failed: {[status for status, _ in replies]}")


def table(rows: list[dict]) -> str:
    app = [r for r in rows if r["role"] != "postgres"]
    lines = ["| process | pid | RSS MiB | USS MiB | PSS MiB |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['role']} | {r['pid']} | {r['rss']:.0f} | {r['uss']:.0f} | {r['pss']:.0f} |" for r in app]
    lines.append(f"| **KnowHub total ({len(app)} processes)** | | {sum(r['rss'] for r in app):.0f} | "
                 f"{sum(r['uss'] for r in app):.0f} | **{sum(r['pss'] for r in app):.0f}** |")
    pg = [r for r in rows if r["role"] == "postgres"]
    if pg:
        lines.append(f"| PostgreSQL ({len(pg)} processes, not counted above) | | {sum(r['rss'] for r in pg):.0f} | "
                     f"{sum(r['uss'] for r in pg):.0f} | {sum(r['pss'] for r in pg):.0f} |")
    return "\n".join(lines)


def run(web: int, workers: int, saves: int, searches: int, keep: bool = False) -> list[dict]:
    var_dir = Path(tempfile.mkdtemp(prefix="khmem-")) / "var"
    var_dir.mkdir()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "CELERY_", "DJANGO_SETTINGS"))}
    env.update(KNOWHUB_VAR_DIR=str(var_dir), PORT=str(port), MCP_PORT=str(free_port()), PYTHONUNBUFFERED="1",
               KNOWHUB_CURATOR_PASSWORD=secrets.token_urlsafe(12))
    log = open(var_dir.parent / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "manage.py", "serve", "--web-workers", str(web), "--worker-concurrency",
                             str(workers)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait(lambda: proc.poll() is not None or http(base, "GET", "/healthz")[0] == 200, 300, "/healthz")
        if proc.poll() is not None:
            raise RuntimeError("serve exited:\n" + (var_dir.parent / "serve.log").read_text()[-3000:])
        made = subprocess.run([sys.executable, "manage.py", "create_agent_token", "--agent", "bench_memory", "--scopes",
                               "org:bench"], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
        token = made.stdout.splitlines()[1].strip()
        warm(base, token, saves, searches, web)
        time.sleep(2)
        return measure(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        if not keep:
            shutil.rmtree(var_dir.parent, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--web", type=int, default=4, help="web processes (gunicorn workers)")
    parser.add_argument("--workers", type=int, default=2, help="Celery pool children (worker concurrency)")
    parser.add_argument("--saves", type=int, default=8)
    parser.add_argument("--searches", type=int, default=16)
    parser.add_argument("--keep-var", action="store_true", help="keep the temporary var/ (logs) for a look")
    parser.add_argument("--json", action="store_true", help="the rows as JSON instead of the table")
    args = parser.parse_args(argv)
    rows = run(args.web, args.workers, args.saves, args.searches, keep=args.keep_var)
    if args.json:
        print(json.dumps(rows))
    else:
        print(f"{describe()}; Python {sys.version.split()[0]}")
        print(f"`bench/memory.py --web {args.web} --workers {args.workers}` after {args.saves} saves and {args.searches} searches\n")
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
