"""`make run`: migrate, ensure a curator, then run gunicorn (ASGI: Django and /mcp) and a Celery worker.

The processes run in their own sessions so that Ctrl-C reaches only this
supervisor, which stops them in order (web, then worker) and, last, the
embedded PostgreSQL when this process exits. A process that dies on its own
is restarted with a backoff, after its process group is killed (a Celery
worker's pool children must not run on); see knowhub_site.supervisor.
"""
import json
import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.request

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from knowhub_site.supervisor import Child

READY_TIMEOUT_SECONDS = 60


class Command(BaseCommand):
    help = "Run the whole stack: web server (gunicorn) and Celery worker, on embedded PostgreSQL unless DATABASE_URL is set."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=settings.PORT)
        parser.add_argument("--web-workers", type=int, default=int(os.environ.get("WEB_CONCURRENCY", "2")))
        parser.add_argument("--worker-concurrency", type=int, default=int(os.environ.get("CELERY_CONCURRENCY", "2")))

    def handle(self, *args, host, port, web_workers, worker_concurrency, **options):
        self._check_port_free(host, port)
        where = "embedded PostgreSQL in " + str(settings.VAR_DIR / "pgdata") if settings.EMBEDDED_DB else "DATABASE_URL"
        self.stdout.write(f"Database: {where}")
        if not settings.KNOWHUB_ENCRYPTION_KEYS:
            from resources.crypto import configured_keys

            configured_keys()  # creates var/encryption_key (0600) on first start
            self.stdout.write(f"Secrets: encrypted with a local key in {settings.VAR_DIR / 'encryption_key'} "
                              "(set KNOWHUB_ENCRYPTION_KEYS to use your own)")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("ensure_curator")
        call_command("collectstatic", interactive=False, verbosity=0)

        from knowhub_site.metrics_endpoint import prepare_multiproc_dir

        env = {
            **os.environ,
            **prepare_multiproc_dir(settings.VAR_DIR),  # every child's metrics, summed by /metrics
            "DATABASE_URL": settings.DATABASE_URL,
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "KNOWHUB_VAR_DIR": str(settings.VAR_DIR),
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "knowhub_site.settings"),
        }
        commands = {
            # ASGI (uvicorn workers) so the MCP server's streamable HTTP transport shares the port under /mcp
            "web": [sys.executable, "-m", "gunicorn", "knowhub_site.asgi:application", "--bind", f"{host}:{port}",
                    "--worker-class", "uvicorn_worker.UvicornWorker",
                    "--workers", str(web_workers), "--graceful-timeout", "10",
                    "--no-control-socket"],  # no access log: knowhub_site/request_log.py logs each request
            "worker": [sys.executable, "-m", "celery", "-A", "knowhub_site", "worker", "--loglevel", "info",
                       "--concurrency", str(worker_concurrency), "--hostname", f"knowhub-{port}@%h",
                       # periodic tasks (resource expiry) run in this one worker's embedded beat
                       "--beat", "--schedule", str(settings.VAR_DIR / "celerybeat-schedule")],
        }
        children = {
            "web": Child("web", commands["web"], env=env, log=self._log),
            "worker": Child("worker", commands["worker"], env=env, log=self._log,
                            on_death=lambda pid: self._forget_dead_worker(f"knowhub-{port}@", pid)),
        }

        stopping = False

        def request_stop(signum, frame):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        for child in children.values():
            child.start()

        # Only Ctrl-C or SIGTERM ends this loop: a child that dies is reaped and restarted.
        url = f"http://{'localhost' if host in ('127.0.0.1', '0.0.0.0') else host}:{port}/"
        ready = Readiness(url, deadline=time.monotonic() + READY_TIMEOUT_SECONDS)
        while not stopping:
            for child in children.values():
                child.check()
            if ready.pending:
                self._announce(ready.probe(), url)
            time.sleep(0.5)

        self.stdout.write("Stopping KnowHub...")
        for name in ("web", "worker"):
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

    def _announce(self, state: str | None, url: str) -> None:
        if state == "ready":
            self.stdout.write(self.style.SUCCESS(f"\nKnowHub is running at {url}"))
            self.stdout.write(f"  curation UI: {url}  (log in as the curator account above)")
            self.stdout.write(f"  admin:  {url}admin/")
            self.stdout.write(f"  health: {url}healthz")
            self.stdout.write("Press Ctrl-C to stop.\n")
        elif state == "late":
            self.stderr.write(f"KnowHub did not become healthy within {READY_TIMEOUT_SECONDS}s; see {url}healthz")

    def _check_port_free(self, host, port):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                raise CommandError(f"cannot listen on {host}:{port} ({exc.strerror}); set PORT to a free port") from exc


class Readiness:
    """Polls /healthz until the stack first reports ok (or the deadline passes)."""

    PROBE_EVERY_SECONDS = 1.0

    def __init__(self, url: str, *, deadline: float):
        self.url, self.deadline = url, deadline
        self.pending = True
        self.next_probe = 0.0

    def probe(self) -> str | None:
        """"ready" or "late" once (then no longer pending); None while still waiting."""
        now = time.monotonic()
        if now < self.next_probe:
            return None
        self.next_probe = now + self.PROBE_EVERY_SECONDS
        try:
            with urllib.request.urlopen(self.url + "healthz", timeout=2) as response:
                report = json.load(response)
        except urllib.error.HTTPError as exc:
            report = json.load(exc)
        except (OSError, ValueError):
            report = {}
        if report.get("status") == "ok":
            self.pending = False
            return "ready"
        if now > self.deadline:
            self.pending = False
            return "late"
        return None
