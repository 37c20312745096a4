"""`make run` brings the whole stack up, healthy, and Ctrl-C brings it down; what it prints is for a person."""
import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.conftest import REPO_ROOT, wait_for
from tests.faults.conftest import gone

pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def healthz(port: int):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)
    except OSError:
        return None, None


class MakeRun:
    def __init__(self, var_dir, port, mcp_port):
        # as a person runs it: not a sub-make of `make test-all` (which would print "make[1]: Entering directory")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("DATABASE_URL", "CELERY_", "DJANGO_SETTINGS", "MAKE", "MFLAGS"))}
        env.update(KNOWHUB_VAR_DIR=str(var_dir), PORT=str(port), MCP_PORT=str(mcp_port), PYTHONUNBUFFERED="1")
        self.log = var_dir.parent / f"make-run-{port}-{os.urandom(3).hex()}.log"
        self.log_file = open(self.log, "w")
        self.proc = subprocess.Popen(
            ["make", "run"], cwd=REPO_ROOT, env=env, stdout=self.log_file, stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text()

    def ctrl_c(self, timeout=60) -> int:
        # A terminal sends SIGINT to the whole foreground process group.
        return self._from_the_terminal(signal.SIGINT, timeout)

    def hang_up(self, timeout=60) -> int:
        # A terminal that closes sends SIGHUP to its foreground process group.
        return self._from_the_terminal(signal.SIGHUP, timeout)

    def _from_the_terminal(self, signum: int, timeout: float) -> int:
        os.killpg(self.proc.pid, signum)
        try:
            return self.proc.wait(timeout)
        finally:
            self.log_file.close()


def serve_children_pids(var_dir) -> list[int]:
    """The pids of the model service, gunicorn and Celery processes running for this var/ (by environment and command
    line): serve's children and what they forked."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "environ"]):
        try:
            env = proc.info["environ"] or {}
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
        if env.get("KNOWHUB_VAR_DIR") == str(var_dir) and any(
                marker in " ".join(proc.info["cmdline"] or []) for marker in ("model_service", "gunicorn", "celery")):
            found.append(proc.info["pid"])
    assert found, "no child of serve found"
    return found


def embedded_postgres_running(var_dir) -> bool:
    pid_file = var_dir / "pgdata" / "postmaster.pid"
    if not pid_file.exists():
        return False
    return not gone(int(pid_file.read_text().split()[0]))


def assert_curation_ui_served(port: int) -> None:
    """The login page renders under gunicorn, and whitenoise serves htmx from the collected static files."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=10) as response:
        page = response.read().decode()
    htmx = re.search(r'src="(/static/vendor/htmx\.min\.[0-9a-f]+\.js)"', page)
    assert htmx, "the login page does not load the vendored, hashed htmx"
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{htmx.group(1)}", timeout=10) as response:
        assert response.read(20).startswith(b"var htmx")


def assert_logs_in(url: str, password: str) -> None:
    """The curator's one-time password opens the admin."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    form = opener.open(url + "admin/login/", timeout=10).read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    data = urllib.parse.urlencode({"username": "curator", "password": password, "csrfmiddlewaretoken": csrf,
                                   "next": "/admin/"}).encode()
    request = urllib.request.Request(url + "admin/login/", data=data, headers={"Referer": url + "admin/login/"})
    with opener.open(request, timeout=10) as response:
        assert response.url.endswith("/admin/") and "Log out" in response.read().decode()


# What the terminal may show: make's command, serve's own lines, the block, and the stop.
SERVE_LINE = re.compile(r"^(\.venv/bin/python manage\.py serve|Database: |Secrets: |Starting the model service|"
                        r"Press Ctrl-C|Stopping KnowHub|Stopped \(restarts|-{20,}|$)")
CHILD_OR_WARNING = re.compile(r"Warning|warnings\.warn|Traceback|\[INFO\]|INFO/|celery@|ForkPoolWorker|gunicorn|Booting worker|"
                              r"prefix dict|model_service:")


def assert_readable(out: str, port: int, mcp_port: int) -> list[str]:
    """Only serve's lines; the URLs and the curator's login (its one-time password) last, in one block; the block."""
    lines = out.splitlines()
    assert not [line for line in lines if CHILD_OR_WARNING.search(line)], out
    start = lines.index(next(line for line in lines if line.startswith("KnowHub is running at")))
    assert all(SERVE_LINE.match(line) for line in lines[:start]), out
    block = lines[start:lines.index("Press Ctrl-C to stop.", start)]
    for url in ("", "admin/", "api/", "healthz"):
        assert any(f"http://localhost:{port}/{url}" in line for line in block), (url, block)
    assert any(f"MCP:         http://localhost:{mcp_port}/mcp" in line for line in block), block
    assert any("var/logs/web.log, mcp.log, worker.log, models.log" in line for line in block)
    assert all(SERVE_LINE.match(line) for line in lines[lines.index("Press Ctrl-C to stop.", start):]), out
    return block


def test_make_run_comes_up_healthy_stops_cleanly_and_keeps_data(tmp_path):
    var_dir = tmp_path / "var"
    port, mcp_port = free_port(), free_port()

    first = MakeRun(var_dir, port, mcp_port)
    try:
        status, body = wait_for(lambda: healthz(port)[0] == 200 and healthz(port), timeout=180,
                                message="/healthz to answer 200")
        assert body["down"] == [] and set(body["checks"]) == {"database", "pgvector", "broker", "worker", "models"}
        wait_for(lambda: "Press Ctrl-C to stop." in first.output(), timeout=30, message="the ready block")
        assert_curation_ui_served(port)
        # threaded WSGI serves Django (static files too); the MCP server runs in its own ASGI process, behind tokens
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/admin/css/base.css", timeout=5) as response:
            assert response.status == 200
        request = urllib.request.Request(f"http://127.0.0.1:{mcp_port}/mcp", data=b"{}", method="POST",
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 401
        request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=b"{}", method="POST",
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as elsewhere:
            urllib.request.urlopen(request, timeout=5)
        assert elsewhere.value.code == 421
        assert json.load(elsewhere.value)["mcp_url"] == f"http://127.0.0.1:{mcp_port}/mcp"
        block = "\n".join(assert_readable(first.output(), port, mcp_port))
        password = re.search(r"Created curator account 'curator' with password: (\S+)", block).group(1)
        assert_logs_in(f"http://127.0.0.1:{port}/", password)
    finally:
        first.ctrl_c()
    out = first.output()
    assert "Created curator account 'curator' with password: " in out
    assert "This password is shown only once" in out
    assert f"Secrets: encrypted with a local key in {var_dir / 'encryption_key'}" in out
    assert (var_dir / "encryption_key").stat().st_mode & 0o777 == 0o600
    assert "beat: Starting" in (var_dir / "logs" / "worker.log").read_text()  # periodic tasks (resource expiry) run
    assert "Using worker: gthread" in (var_dir / "logs" / "web.log").read_text()
    assert "Application startup complete" in (var_dir / "logs" / "mcp.log").read_text()
    assert "loaded in" in (var_dir / "logs" / "models.log").read_text()
    assert healthz(port) == (None, None)
    wait_for(lambda: not embedded_postgres_running(var_dir), timeout=30, message="embedded PostgreSQL to stop")

    second = MakeRun(var_dir, port, mcp_port)
    try:
        wait_for(lambda: healthz(port)[0] == 200, timeout=180, message="/healthz after restart")
        wait_for(lambda: "Press Ctrl-C to stop." in second.output(), timeout=30, message="the ready block")
        second_children = serve_children_pids(var_dir)
    finally:
        second.hang_up()  # the terminal closes: the stack stops as for Ctrl-C, nothing is left running
    wait_for(lambda: healthz(port) == (None, None), timeout=60, message="the web server to stop after the hangup")
    wait_for(lambda: not embedded_postgres_running(var_dir), timeout=60, message="embedded PostgreSQL to stop")
    wait_for(lambda: all(gone(pid) for pid in second_children), timeout=60, message="the children to stop")
    assert "Curator account 'curator' exists" in second.output()
    assert "Created curator account" not in second.output()
    assert any("Curator account 'curator' exists" in line for line in assert_readable(second.output(), port, mcp_port))
