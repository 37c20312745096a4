"""The whole stack (`manage.py serve`: model service, gunicorn and Celery worker on an embedded PostgreSQL) as a subprocess.

Load and fault tests drive it over HTTP on loopback, as agents would (its children log to var/logs/). Each
stack has its own var/ (its own embedded database), so it never shares state
with the test database or another stack.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO_ROOT, wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Reply:
    status: int | None  # None: no HTTP answer at all (connection refused, reset, timeout)
    body: bytes = b""
    headers: dict = field(default_factory=dict)

    def json(self):
        return json.loads(self.body)


class Stack:
    def __init__(self, var_dir: Path, *, port: int | None = None, extra_env: dict | None = None,
                 web_workers: int = 2, worker_concurrency: int = 2):
        self.var_dir = var_dir
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.mcp_port = free_port()
        self.mcp_base = f"http://127.0.0.1:{self.mcp_port}"  # the MCP server's own process
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "CELERY_", "DJANGO_SETTINGS"))}
        self.env.update(KNOWHUB_VAR_DIR=str(var_dir), PORT=str(self.port), MCP_PORT=str(self.mcp_port), PYTHONUNBUFFERED="1",
                        KNOWHUB_WORKER_HEARTBEAT_SECONDS="1", KNOWHUB_CURATOR_PASSWORD="curator-pw-for-tests",
                        **(extra_env or {}))
        self.args = ["--web-workers", str(web_workers), "--worker-concurrency", str(worker_concurrency)]
        self.log = var_dir.parent / f"stack-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    # --- lifecycle -------------------------------------------------------------
    def start(self, timeout: float = 240) -> "Stack":
        self.var_dir.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log, "a")
        self.proc = subprocess.Popen([sys.executable, "manage.py", "serve", *self.args], cwd=REPO_ROOT, env=self.env,
                                     stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: self.healthy() or self._died(), timeout=timeout, interval=1, message="the stack to be healthy")
        assert self.proc.poll() is None, f"the stack exited:\n{self.output()[-4000:]}"
        return self

    def _died(self) -> bool:
        return self.proc.poll() is not None

    def stop(self, timeout: float = 60) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log_file.close()

    def output(self) -> str:
        """What `manage.py serve` itself printed (its children log to var/logs/, see `child_log`)."""
        return self.log.read_text(errors="replace")

    def child_log(self, name: str) -> str:
        """The log of one child process: "web", "worker" or "models"."""
        path = self.var_dir / "logs" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def manage(self, *args: str, timeout: float = 120) -> str:
        """Run a management command against this stack's database; its stdout."""
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=REPO_ROOT, env=self.env, capture_output=True,
                              text=True, timeout=timeout)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def sql(self, query: str) -> list[tuple]:
        """Rows of one query, run in this stack's database by a separate process."""
        code = ("import json,sys; from django.db import connection; c=connection.cursor(); c.execute(sys.argv[1]); "
                "print(json.dumps(c.fetchall() if c.description else [], default=str))")
        out = self.manage("shell", "-c", f"import sys; sys.argv=['', {query!r}]; exec({code!r})")
        return [tuple(row) for row in json.loads(out.strip().splitlines()[-1])]

    def token(self, agent: str = "load_agent", scopes: str = "org:load", *extra: str) -> str:
        out = self.manage("create_agent_token", "--agent", agent, "--scopes", scopes, *extra)
        return out.splitlines()[1].strip()

    # --- HTTP --------------------------------------------------------------------
    def request(self, method: str, path: str, body=None, token: str | None = None, timeout: float = 60) -> Reply:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return Reply(response.status, response.read(), dict(response.headers))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, exc.read(), dict(exc.headers))
        except OSError:
            return Reply(None)

    def healthy(self) -> bool:
        return self.request("GET", "/healthz", timeout=10).status == 200


def hammer(call, *, clients: int, per_client: int | None = None, seconds: float | None = None) -> list[Reply]:
    """`clients` threads each calling `call(client, n)` `per_client` times or for `seconds`; every reply."""
    deadline = time.monotonic() + seconds if seconds else None

    def client(index: int) -> list[Reply]:
        replies, n = [], 0
        while (per_client is None or n < per_client) and (deadline is None or time.monotonic() < deadline):
            replies.append(call(index, n))
            n += 1
        return replies

    with ThreadPoolExecutor(clients) as pool:
        return [reply for replies in pool.map(client, range(clients)) for reply in replies]


def statuses(replies: list[Reply]) -> dict:
    counts: dict = {}
    for reply in replies:
        counts[reply.status] = counts.get(reply.status, 0) + 1
    return counts


@contextmanager
def asgi_server(env: dict):
    """The web process's ASGI application (Django + /mcp) under uvicorn on a free port; yields its URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "knowhub_site.asgi:application", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"], cwd=REPO_ROOT, env=env,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def up():
        assert proc.poll() is None, "uvicorn exited"
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True  # it answers (503 while no worker runs)
        except OSError:
            return False

    try:
        wait_for(up, timeout=60, message="uvicorn")
        yield url
    finally:
        proc.terminate()
        proc.wait(20)
