"""`make run`: migrate, ensure a curator, then run gunicorn (ASGI: Django and /mcp) and a Celery worker.

The processes run in their own sessions so that Ctrl-C reaches only this
supervisor, which stops them in order (web, then worker) and, last, the
embedded PostgreSQL when this process exits.
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

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

STOP_TIMEOUT_SECONDS = 20
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

        env = {
            **os.environ,
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
                    "--access-logfile", "-", "--no-control-socket"],
            "worker": [sys.executable, "-m", "celery", "-A", "knowhub_site", "worker", "--loglevel", "info",
                       "--concurrency", str(worker_concurrency), "--hostname", f"knowhub-{port}@%h",
                       # periodic tasks (resource expiry) run in this one worker's embedded beat
                       "--beat", "--schedule", str(settings.VAR_DIR / "celerybeat-schedule")],
        }
        processes = {name: subprocess.Popen(cmd, env=env, start_new_session=True) for name, cmd in commands.items()}

        stopping = False

        def request_stop(signum, frame):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)

        url = f"http://{'localhost' if host in ('127.0.0.1', '0.0.0.0') else host}:{port}/"
        self._announce_when_ready(url, processes, lambda: stopping)

        exit_code = 0
        while not stopping:
            for name, proc in processes.items():
                if proc.poll() is not None:
                    self.stderr.write(f"{name} exited unexpectedly with code {proc.returncode}; stopping.")
                    exit_code = 1
                    stopping = True
                    break
            time.sleep(0.5)

        self.stdout.write("Stopping KnowHub...")
        for name in ("web", "worker"):
            self._stop(name, processes[name])
        self.stdout.write("Stopped." + (" The embedded database stops as this process exits." if settings.EMBEDDED_DB else ""))
        if exit_code:
            raise CommandError("a process of the stack failed; see its output above")

    def _check_port_free(self, host, port):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                raise CommandError(f"cannot listen on {host}:{port} ({exc.strerror}); set PORT to a free port") from exc

    def _announce_when_ready(self, url, processes, is_stopping):
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline and not is_stopping():
            if any(proc.poll() is not None for proc in processes.values()):
                return
            try:
                with urllib.request.urlopen(url + "healthz", timeout=5) as response:
                    report = json.load(response)
            except urllib.error.HTTPError as exc:
                report = json.load(exc)
            except OSError:
                time.sleep(0.5)
                continue
            if report["status"] == "ok":
                self.stdout.write(self.style.SUCCESS(f"\nKnowHub is running at {url}"))
                self.stdout.write(f"  curation UI: {url}  (log in as the curator account above)")
                self.stdout.write(f"  admin:  {url}admin/")
                self.stdout.write(f"  health: {url}healthz")
                self.stdout.write("Press Ctrl-C to stop.\n")
                return
            time.sleep(1)
        if not is_stopping():
            self.stderr.write(f"KnowHub did not become healthy within {READY_TIMEOUT_SECONDS}s; see {url}healthz")

    def _stop(self, name, proc):
        if proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.stderr.write(f"{name} did not stop in {STOP_TIMEOUT_SECONDS}s; killing it")
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
