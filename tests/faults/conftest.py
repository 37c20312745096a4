"""Fault tests: the whole stack (`manage.py serve`) as a subprocess, against the test database.

`running_stack` starts `serve` on a free port with the loopback fake LLM and
fast heartbeats, waits for /healthz to answer 200, and on teardown stops it
with SIGTERM, then kills anything of it still alive, so a failing test never
leaves processes behind. Tests using it need `django_db(transaction=True)` to
see what the stack writes.
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

import psutil
import pytest
from django.conf import settings

from tests.conftest import REPO_ROOT, database_url_for_subprocess, wait_for

STACK_READY_SECONDS = 180


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def gone(pid: int) -> bool:
    """Not running: no such process, or a zombie nobody has reaped yet (it runs nothing)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class Stack:
    def __init__(self, *, var_dir, port: int, extra_env: dict):
        self.port = port
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "CELERY_", "DJANGO_SETTINGS"))}
        env.update(
            DATABASE_URL=database_url_for_subprocess(), CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
            DJANGO_SETTINGS_MODULE="knowhub_site.test_settings", KNOWHUB_VAR_DIR=str(var_dir), PORT=str(port),
            MCP_PORT=str(free_port()), PYTHONUNBUFFERED="1", WEB_CONCURRENCY="1", CELERY_CONCURRENCY="1",
            KNOWHUB_WORKER_HEARTBEAT_SECONDS="1", KNOWHUB_WORKER_STALE_SECONDS="4", KNOWHUB_RETRY_BACKOFF_SECONDS="0",
            **extra_env,
        )
        var_dir.mkdir(parents=True, exist_ok=True)
        self.log = var_dir / "serve.log"
        self._log_file = open(self.log, "w")
        self.proc = subprocess.Popen([sys.executable, "manage.py", "serve"], cwd=REPO_ROOT, env=env,
                                     stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True)
        self._seen: set[int] = set()

    def output(self) -> str:
        return self.log.read_text()

    def request(self, method: str, path: str, body=None, token: str | None = None, timeout: float = 10):
        """(status, json) of one call, or (None, None) when nothing answers."""
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as exc:
            return exc.code, json.load(exc)
        except (OSError, ValueError):
            return None, None

    def healthz(self):
        return self.request("GET", "/healthz")

    def _child(self, word: str) -> psutil.Process | None:
        for child in psutil.Process(self.proc.pid).children():
            try:
                if child.status() != psutil.STATUS_ZOMBIE and word in " ".join(child.cmdline()):
                    self._seen.add(child.pid)
                    return child
            except psutil.Error:
                continue  # died just now, not yet reaped by serve
        return None

    def worker(self) -> psutil.Process | None:
        """The Celery worker's main process."""
        return self._child("celery")

    def web(self) -> psutil.Process | None:
        """The web server's gunicorn master (the MCP server's is another, serving knowhub_site.asgi)."""
        return self._child("knowhub_site.wsgi")

    def process_talking_to(self, port: int) -> psutil.Process | None:
        """The worker process with a connection open to loopback `port` (the pool child mid-LLM-call)."""
        worker = self.worker()
        for proc in ([worker] + worker.children(recursive=True)) if worker else []:
            try:
                if any(c.raddr and c.raddr.port == port for c in proc.net_connections(kind="tcp")):
                    return proc
            except psutil.NoSuchProcess:
                continue
        return None

    def all_pids(self) -> set[int]:
        try:
            pids = {p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)}
        except psutil.NoSuchProcess:
            pids = set()
        self._seen |= pids
        return pids

    def stop(self, timeout: float = 60) -> int | None:
        """SIGTERM (as Ctrl-C would), then kill whatever of the stack is left; returns serve's exit code."""
        pids = self.all_pids() | self._seen
        code = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        else:
            code = self.proc.returncode
        for pid in pids:
            if not gone(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self._log_file.close()
        return code


@pytest.fixture
def running_stack(fake_openai, django_db_setup, django_db_blocker, tmp_path):
    """`manage.py serve` on a free port, healthy, with the fake LLM configured; stopped after the test."""
    with django_db_blocker.unblock():
        stack = Stack(var_dir=tmp_path / "var", port=free_port(), extra_env={
            "OPENAI_BASE_URL": fake_openai.base_url, "OPENAI_API_KEY": "test-key", "KNOWHUB_LLM_MODEL": "fake-model",
        })
    try:
        wait_for(lambda: stack.healthz()[0] == 200 or stack.proc.poll() is not None, timeout=STACK_READY_SECONDS,
                 interval=0.5, message="the stack's /healthz to answer 200")
        assert stack.proc.poll() is None, stack.output()
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def agent_token(db):
    from agents.services import agent_token_create

    _, key = agent_token_create(agent_id="fault_agent", readable_scopes=["org:faults"])
    return key


def timed(predicate, *, timeout: float, message: str) -> float:
    """Seconds until `predicate` holds (fails after `timeout`)."""
    start = time.monotonic()
    wait_for(predicate, timeout=timeout, interval=0.2, message=message)
    return time.monotonic() - start
