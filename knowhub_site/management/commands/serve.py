"""`make run`: migrate, ensure a curator, then run the model service, the web server, the MCP server and a Celery worker.

The web server is gunicorn with threaded WSGI workers (the REST API, the
curation UI, the admin): a request runs on one of a bounded number of
threads, each with a pooled database connection. The MCP server's streamable
HTTP transport needs ASGI, so it runs in a gunicorn of its own (a uvicorn
worker, `knowhub_site.asgi`) on MCP_PORT (PORT + 1 by default); the web
server answers /mcp with where that is. Under ASGI every Django request hops
onto a thread of its own, which doubled a plain read's time: the REST API no
longer pays it (BENCHMARKS.md, "threaded WSGI against ASGI").

The model service (knowledge.search.model_service) holds the embedding models
and jieba once for the machine; the web processes and the worker's pool
children ask it over a unix socket (KNOWHUB_MODEL_SERVICE). Each process leads
its own process group (in this one's session) so that Ctrl-C reaches only this
supervisor, which stops
them in order (web, worker, model service) and, last, the embedded PostgreSQL
when this process exits. A process that dies on its own is restarted with a
backoff, after its process group is killed (a Celery worker's pool children
must not run on); see knowhub_site.supervisor.

The terminal shows this supervisor's lines only: the children's logs go to
var/logs/ (web.log, worker.log, models.log), and once the stack is healthy one
block says where it runs, how to log in (the curator's one-time password) and
where the logs are.
"""
import json
import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from io import StringIO
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from knowhub_site.supervisor import Child
from knowledge.search import model_client

READY_TIMEOUT_SECONDS = 60
MODELS_WAIT_SECONDS = 30  # the web processes start after the model service answers, or after this anyway


class Command(BaseCommand):
    help = "Run the whole stack: web server (gunicorn) and Celery worker, on embedded PostgreSQL unless DATABASE_URL is set."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=settings.PORT)
        parser.add_argument("--mcp-port", type=int, default=None, help="the MCP server's port (default: MCP_PORT, or port + 1)")
        parser.add_argument("--web-workers", type=int, default=int(os.environ.get("WEB_CONCURRENCY", "2")))
        parser.add_argument("--worker-concurrency", type=int, default=int(os.environ.get("CELERY_CONCURRENCY", "2")))

    def handle(self, *args, host, port, mcp_port, web_workers, worker_concurrency, **options):
        if mcp_port is None:
            mcp_port = settings.MCP_PORT if "MCP_PORT" in os.environ else port + 1
        self._check_port_free(host, port, "PORT")
        self._check_port_free(host, mcp_port, "MCP_PORT")
        where = "embedded PostgreSQL in " + str(settings.VAR_DIR / "pgdata") if settings.EMBEDDED_DB else "DATABASE_URL"
        self.stdout.write(f"Database: {where}")
        if not settings.KNOWHUB_ENCRYPTION_KEYS:
            from resources.crypto import configured_keys

            configured_keys()  # creates var/encryption_key (0600) on first start
            self.stdout.write(f"Secrets: encrypted with a local key in {settings.VAR_DIR / 'encryption_key'} "
                              "(set KNOWHUB_ENCRYPTION_KEYS to use your own)")
        call_command("migrate", interactive=False, verbosity=0)
        curator = StringIO()  # printed last, with the URLs, once the stack is healthy
        call_command("ensure_curator", stdout=curator)
        call_command("collectstatic", interactive=False, verbosity=0)

        from knowhub_site.metrics_endpoint import prepare_multiproc_dir

        logs = settings.VAR_DIR / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        socket_path = model_client.socket_path_for(settings.VAR_DIR)
        env = {
            **os.environ,
            **prepare_multiproc_dir(settings.VAR_DIR),  # every child's metrics, summed by /metrics
            "DATABASE_URL": settings.DATABASE_URL,
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "KNOWHUB_VAR_DIR": str(settings.VAR_DIR),
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "knowhub_site.settings"),
            "KNOWHUB_MODEL_SERVICE": socket_path,
            "PORT": str(port),
            "MCP_PORT": str(mcp_port),  # the web server's /mcp answer names it
        }
        commands = {
            "models": [sys.executable, "-m", "knowledge.search.model_service", "--socket", socket_path,
                       "--model", settings.KNOWHUB_EMBEDDING_MODEL],
            "web": gunicorn_command("wsgi", bind=f"{host}:{port}", workers=web_workers, threads=web_threads()),
            "mcp": gunicorn_command("asgi", bind=f"{host}:{mcp_port}", workers=1),
            "worker": [sys.executable, "-m", "celery", "-A", "knowhub_site", "worker", "--loglevel", "info",
                       "--concurrency", str(worker_concurrency), "--hostname", f"knowhub-{port}@%h",
                       # periodic tasks (resource expiry) run in this one worker's embedded beat
                       "--beat", "--schedule", str(settings.VAR_DIR / "celerybeat-schedule")],
        }
        children = {
            "models": Child("models", commands["models"], env=env, log=self._log, output=logs / "models.log"),
            "web": Child("web", commands["web"], env=env, log=self._log, output=logs / "web.log"),
            "mcp": Child("mcp", commands["mcp"], env=env, log=self._log, output=logs / "mcp.log"),
            "worker": Child("worker", commands["worker"], env=env, log=self._log, output=logs / "worker.log",
                            on_death=lambda pid: self._forget_dead_worker(f"knowhub-{port}@", pid)),
        }

        stopping = False

        def request_stop(signum, frame):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGHUP, request_stop)  # its terminal closed: stop the stack rather than leave it running
        self.stdout.write(f"Starting the model service, web server, MCP server and worker (their logs: {logs}/)...")
        children["models"].start()
        self._wait_for_models(children["models"], socket_path, lambda: stopping)
        for name in ("web", "mcp", "worker"):
            children[name].start()

        # Only Ctrl-C, SIGTERM or SIGHUP ends this loop: a child that dies is reaped and restarted.
        shown_host = "localhost" if host in ("127.0.0.1", "0.0.0.0") else host
        url, mcp_url = f"http://{shown_host}:{port}/", f"http://{shown_host}:{mcp_port}/"
        ready = Readiness([url, mcp_url], socket_path, deadline=time.monotonic() + READY_TIMEOUT_SECONDS)
        while not stopping:
            for child in children.values():
                child.check()
            if ready.pending:
                self._announce(ready.probe(), url, mcp_url, curator.getvalue(), logs)
            time.sleep(0.5)

        self.stdout.write("Stopping KnowHub...")
        for name in ("web", "mcp", "worker", "models"):
            children[name].stop()
        restarts = ", ".join(f"{name} {child.restarts}" for name, child in children.items())
        self.stdout.write(f"Stopped (restarts: {restarts})."
                          + (" The embedded database stops as this process exits." if settings.EMBEDDED_DB else ""))

    def _log(self, message: str) -> None:
        self.stderr.write(f"[serve] {message}")

    def _forget_dead_worker(self, hostname_prefix: str, pid: int) -> None:
        # Its heartbeat would look fresh for up to KNOWHUB_WORKER_STALE_SECONDS; the
        # restarted worker's first beat then re-sends the jobs it had claimed.
        from django.db import close_old_connections

        from jobs.services import worker_heartbeats_clear_dead

        close_old_connections()
        try:
            worker_heartbeats_clear_dead(hostname_prefix=hostname_prefix, pid=pid)
        except Exception as exc:  # noqa: BLE001 - the heartbeat then simply ages out
            self._log(f"could not clear the dead worker's heartbeat: {exc}")

    def _wait_for_models(self, child: Child, socket_path: str, stopping) -> None:
        """Until the model service answers (the web processes' warm-up asks it), within MODELS_WAIT_SECONDS."""
        deadline = time.monotonic() + MODELS_WAIT_SECONDS
        while not stopping() and time.monotonic() < deadline:
            child.check()
            if model_client.ping(socket_path):
                return
            time.sleep(0.2)
        if not stopping():
            self._log(f"the model service did not answer within {MODELS_WAIT_SECONDS}s; starting the rest anyway "
                      "(search uses keywords until it does)")

    def _announce(self, state: str | None, url: str, mcp_url: str, curator: str, logs) -> None:
        if state == "late":
            self.stderr.write(f"KnowHub did not become healthy within {READY_TIMEOUT_SECONDS}s; see {url}healthz "
                              f"and the logs in {logs}/")
        if state not in ("ready", "late"):
            return
        rule = "-" * 72
        self.stdout.write("\n" + rule)
        self.stdout.write(self.style.SUCCESS(f"KnowHub is running at {url}") if state == "ready"
                          else f"KnowHub is starting at {url} (not healthy yet)")
        self.stdout.write(f"  Curation UI: {url}")
        self.stdout.write(f"  Admin:       {url}admin/")
        self.stdout.write(f"  API:         {url}api/  (docs: {url}api/docs/; tokens: manage.py create_agent_token)")
        self.stdout.write(f"  MCP:         {mcp_url}mcp  (streamable HTTP, Bearer token)")
        self.stdout.write(f"  Health:      {url}healthz")
        self.stdout.write(f"  Logs:        {logs}/web.log, mcp.log, worker.log, models.log")
        self.stdout.write("")
        self.stdout.write(curator.rstrip())
        self.stdout.write(rule)
        self.stdout.write("Press Ctrl-C to stop.\n")

    def _check_port_free(self, host, port, variable):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                raise CommandError(f"cannot listen on {host}:{port} ({exc.strerror}); set {variable} to a free port") from exc


# Read by gunicorn as a file, not imported as knowhub_site.gunicorn_conf: importing the package would load the Celery
# app into gunicorn's master (+16 MB), which never runs the application.
GUNICORN_CONF = Path(__file__).resolve().parents[2] / "gunicorn_conf.py"


def gunicorn_command(kind: str, *, bind: str, workers: int, threads: int = 1) -> list[str]:
    """gunicorn serving Django as threaded WSGI ("wsgi": at most `threads` requests at once per process, each on a
    pooled connection; the web server) or as ASGI ("asgi": uvicorn workers; the MCP server's streamable HTTP
    transport, knowhub_site/asgi.py). No access log: knowhub_site/request_log.py logs each request. Its settings and
    its own error replies: knowhub_site/gunicorn_conf.py."""
    server = (["knowhub_site.asgi:application", "--worker-class", "uvicorn_worker.UvicornWorker"] if kind == "asgi"
              else ["knowhub_site.wsgi:application", "--worker-class", "gthread", "--threads", str(threads),
                    "--config", str(GUNICORN_CONF)])  # uvicorn parses HTTP itself (h11)
    return [sys.executable, "-m", "gunicorn", *server, "--bind", bind, "--workers", str(workers),
            "--graceful-timeout", "10", "--no-control-socket"]


def web_threads() -> int:
    """Requests one web process works on at once: KNOWHUB_MAX_CONCURRENT_REQUESTS, else one less than its pool
    (a thread never waits for a connection)."""
    return settings.KNOWHUB_MAX_CONCURRENT_REQUESTS or max(1, settings.KNOWHUB_DB_POOL_MAX - 1)


class Readiness:
    """Polls /healthz of the web and MCP servers and the model service until all first answer ok (or the deadline
    passes)."""

    PROBE_EVERY_SECONDS = 1.0

    def __init__(self, urls: list[str], socket_path: str, *, deadline: float):
        self.urls, self.socket_path, self.deadline = urls, socket_path, deadline
        self.pending = True
        self.next_probe = 0.0

    def probe(self) -> str | None:
        """"ready" or "late" once (then no longer pending); None while still waiting."""
        now = time.monotonic()
        if now < self.next_probe:
            return None
        self.next_probe = now + self.PROBE_EVERY_SECONDS
        if all(_healthy(url) for url in self.urls) and model_client.ping(self.socket_path):
            self.pending = False
            return "ready"
        if now > self.deadline:
            self.pending = False
            return "late"
        return None


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "healthz", timeout=2) as response:
            report = json.load(response)
    except urllib.error.HTTPError as exc:
        report = json.load(exc)
    except (OSError, ValueError):
        report = {}
    return report.get("status") == "ok"
