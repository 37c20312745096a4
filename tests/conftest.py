import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

REPO_ROOT = Path(__file__).resolve().parent.parent


def database_url_for_subprocess() -> str:
    """A DATABASE_URL that points a child process at the test database."""
    s = connection.settings_dict
    options = s.get("OPTIONS", {})
    host = s.get("HOST") or options.get("host", "")
    port = s.get("PORT") or options.get("port", "")
    auth = quote(s["USER"] or "") + (":" + quote(s["PASSWORD"]) if s.get("PASSWORD") else "")
    if host.startswith("/"):
        return f"postgresql://{auth}@/{s['NAME']}?host={quote(host, safe='/')}&port={port or 5432}"
    return f"postgresql://{auth}@{host}:{port or 5432}/{s['NAME']}"


def wait_for(predicate, *, timeout: float, interval: float = 0.25, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


class CeleryWorker:
    """A real `celery worker` process against the test database."""

    def __init__(self, *, broker_url: str | None = None, name: str = "test-worker", extra_env: dict | None = None):
        db_url = database_url_for_subprocess()
        self.hostname = f"{name}@%h"
        self.env = {
            **os.environ,
            "DATABASE_URL": db_url,
            "CELERY_BROKER_URL": broker_url or settings.CELERY_BROKER_URL,
            "KNOWHUB_WORKER_HEARTBEAT_SECONDS": "1",
            "DJANGO_SETTINGS_MODULE": "knowhub_site.test_settings",
            **(extra_env or {}),
        }
        self.proc: subprocess.Popen | None = None

    def start(self) -> "CeleryWorker":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "knowhub_site", "worker", "--loglevel", "warning",
             "--concurrency", "1", "--pool", "prefork", "--hostname", self.hostname],
            cwd=REPO_ROOT, env=self.env, start_new_session=True,
        )
        return self

    def stop(self, sig=signal.SIGTERM, timeout: float = 30) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def celery_worker(django_db_setup, django_db_blocker):
    """A running worker; stopped (and its heartbeat cleared) after the test."""
    with django_db_blocker.unblock():
        worker = CeleryWorker().start()
    yield worker
    worker.stop()


@pytest.fixture
def curator(django_user_model):
    return django_user_model.objects.create_superuser(username="alice", email="", password="pw-for-tests")


@pytest.fixture
def fake_openai(settings):
    """A loopback OpenAI-compatible server, configured as the LLM."""
    from tests.fake_openai import FakeOpenAI

    server = FakeOpenAI().start()
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.KNOWHUB_LLM_MODEL = "fake-model"
    yield server
    server.stop()


@pytest.fixture
def llm_worker(fake_openai, django_db_setup, django_db_blocker):
    """A real worker whose LLM is the loopback fake, retrying without waiting."""
    with django_db_blocker.unblock():
        worker = CeleryWorker(name="llm-worker", extra_env={
            "OPENAI_BASE_URL": fake_openai.base_url, "OPENAI_API_KEY": "test-key", "KNOWHUB_LLM_MODEL": "fake-model",
            "KNOWHUB_RETRY_BACKOFF_SECONDS": "0",
        }).start()
    yield worker
    worker.stop()
