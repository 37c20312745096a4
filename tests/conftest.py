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

    def __init__(self, *, broker_url: str | None = None, name: str = "test-worker", extra_env: dict | None = None,
                 log_path: Path | None = None, loglevel: str = "warning"):
        db_url = database_url_for_subprocess()
        self.hostname = f"{name}@%h"
        self.log_path, self.loglevel = log_path, loglevel  # log_path: its stdout and stderr go there
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
        output = open(self.log_path, "ab") if self.log_path else None
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "knowhub_site", "worker", "--loglevel", self.loglevel,
             "--concurrency", "1", "--pool", "prefork", "--hostname", self.hostname],
            cwd=REPO_ROOT, env=self.env, start_new_session=True, stdout=output, stderr=output,
        )
        if output:
            output.close()  # the child holds its own copy
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


# --- The fast suite and the slow tests (issue 15) ---------------------------------------------------------
# `make test` runs `-m "not slow"`: the fast suite, every app's behaviour in-process (a few minutes on two
# cores). `make test-slow` runs only the slow tests, `make test-all` (and so `.ci/run`) runs both. A test is
# slow when it is marked `e2e` (the whole stack as a subprocess: tests/reliability/, tests/faults/
# test_worker_faults.py, tests/knowhub_site/test_make_run.py) or `browser` (Playwright + chromium:
# tests/curation/test_browser.py, tests/curation/test_xss_browser.py), or when it is listed here: a module
# ("tests/x/test_y.py"), one test of a module ("tests/x/test_y.py::test_name", every parameter of it) or one
# parameter of a test ("tests/x/test_y.py::test_name[param]").
# Each entry costs seconds to minutes of subprocesses or waiting; a listed module must exist and a listed
# test must be defined in it, or the run stops (a stale entry would quietly slow the fast suite down).
SLOW_TESTS = [
    # An import job run by a real Celery worker of its own.
    "tests/ingest/test_import_jobs.py::test_a_real_worker_runs_the_import_job_and_keeps_the_report",
    # A real worker taking a job from behind a backlog of embeddings.
    "tests/jobs/test_queues.py::test_a_job_queued_behind_a_backlog_of_embeddings_runs_before_the_backlog_drains",
    # Conflict detection through a real worker of its own (detection on): a save over the API raises a conflict.
    "tests/knowledge/test_conflicts.py::test_a_save_through_the_api_raises_a_conflict_through_the_real_worker",
    # Fault injection: a real Celery worker against a loopback LLM that fails, stalls or answers junk,
    # retried with backoff (~3.5 min).
    "tests/faults/test_llm_faults.py",
    # Schemathesis: every operation against the live server (`make fuzz` runs its heavier pass).
    "tests/api/test_schemathesis.py",
    # The MCP server as subprocesses: `manage.py mcp` over stdio and uvicorn serving /mcp (~70 s).
    "tests/api/test_mcp.py",
    "tests/clients/test_examples.py::test_mcp_example_over_stdio",
    # A subprocess importing the web entry point, loading the models at boot and without.
    "tests/knowhub_site/test_warmup.py",
    # The model service as a subprocess (loading its models, ~10 s): the same vectors, segments and rarity through it.
    "tests/knowledge/search/test_model_service.py::test_the_service_gives_the_same_vectors_as_the_process",
    "tests/knowledge/search/test_model_service.py::test_the_service_segments_and_rates_words_as_the_process_does",
    "tests/knowledge/search/test_model_service.py::test_a_failed_request_is_reported_and_the_service_keeps_serving",
    "tests/knowledge/search/test_model_service.py::test_a_web_process_with_a_model_service_warms_up_through_it_and_loads_no_model",
    "tests/knowledge/search/test_model_service.py::test_a_query_is_answered_before_a_long_batch_of_passages_finishes",
    "tests/knowledge/search/test_model_service.py::test_healthz_reports_the_running_service_and_its_models",
    "tests/knowledge/search/test_model_service.py::test_the_service_stops_embedding_for_a_worker_that_timed_out_and_serves_the_next",
    "tests/knowledge/search/test_model_service.py::test_a_stopped_service_exits_at_once_with_passages_still_queued",
    # Load and heavy computation: ten thousand inserts; embedding a 16,000-character item chunk by chunk (~25 s).
    "tests/knowledge/test_ids.py::test_ten_thousand_inserts_get_unique_well_formed_ids",
    "tests/knowledge/search/test_indexing.py::test_a_long_item_gets_one_unit_vector_pooled_from_its_chunks_and_is_found_by_its_opening",
    # The client waiting out the live server's real Retry-After (5 s per 503); the 429 case, giving up, the
    # loopback Retry-After and the async client's retries stay fast.
    "tests/clients/test_client_retries.py::test_a_search_is_retried_through_429_and_503_until_it_succeeds[503]",
    "tests/clients/test_client_retries.py::test_a_save_is_retried_with_its_idempotency_key_and_stored_once",
    # The benches (bench/) on generated bases; the retrieval, fusion, halves and keyword-budget ones stay fast.
    "tests/bench/test_bench.py::test_the_ranking_bench_simulates_feedback_and_runs_queries_against_a_scope_with_no_answer",
    "tests/bench/test_bench.py::test_the_scale_seed_fills_a_base_of_the_seeds_shape_and_the_latency_bench_times_it_beside_the_floor",
    "tests/bench/test_bench.py::test_the_ingest_bench_measures_single_saves_the_bulk_path_and_the_workers_embedding",
    "tests/bench/test_bench.py::test_the_slim_bench_times_the_group_finding_of_a_dry_run",
    # A real Celery worker process (celery_worker, llm_worker or CeleryWorker): 10-70 s each, most of it
    # starting, waiting for and stopping the worker; the services they drive run in-process in the fast suite.
    # None of them stays fast: the first worker of a run also works off the embedding messages the in-process
    # tests queued, and after the whole fast suite that outlasted test_evolve.py's 90 s wait.
    "tests/knowledge/test_evolve.py::test_evolve_rewrites_the_item_and_keeps_the_old_version",
    "tests/knowledge/test_evolve.py::test_secrets_of_linked_resources_and_their_earlier_versions_never_reach_the_llm",
    "tests/knowledge/test_evolve.py::test_a_misbehaving_llm_fails_the_job_readably_after_retries_and_leaves_the_item_alone",
    "tests/knowledge/test_evolve.py::test_an_llm_timeout_is_retried_then_fails_the_job",
    "tests/knowledge/test_evolve.py::test_a_worker_killed_mid_job_loses_nothing_and_the_job_runs_once",
    "tests/knowledge/test_evolve.py::test_evolve_runs_through_a_redis_broker_too",
    "tests/knowledge/test_slim.py::test_slim_merges_groups_through_the_worker_and_unmerge_restores_exactly",
    "tests/knowledge/test_slim.py::test_dry_run_proposes_without_writing",
    "tests/knowledge/test_bulk.py::test_bulk_items_are_embedded_by_the_worker_in_batches",
    "tests/ingest/test_documents.py::test_a_document_is_read_by_the_real_worker_and_its_items_are_embedded",
    "tests/knowledge/search/test_indexing.py::test_a_save_is_keyword_searchable_at_once_and_the_worker_embeds_it",
    "tests/clients/test_client_jobs.py::test_wait_for_job_returns_a_finished_job_and_raises_for_a_failed_one",
    "tests/curation/test_evolve_ui.py::test_evolve_queues_polls_then_compares_and_rolls_back",
    "tests/curation/test_review.py::test_find_duplicates_runs_a_dry_run_job_whose_proposals_appear",
    "tests/knowhub_site/test_healthz.py::test_healthz_is_ok_with_a_real_worker_running",
    "tests/knowhub_site/test_healthz.py::test_a_stopped_worker_clears_its_heartbeat_and_healthz_names_it",
    "tests/knowhub_site/test_healthz.py::test_a_worker_on_redis_reports_in",
    "tests/webhooks/test_worker.py",
    # Observability (issue 18): a real worker's JSON log lines and job metrics; the whole stack scraped.
    "tests/knowhub_site/test_observability_worker.py",
]
SLOW_MARKERS = ("e2e", "browser")


def _check_slow_tests():
    for entry in SLOW_TESTS:
        module, _, name = entry.partition("::")
        path = REPO_ROOT / module
        if not path.is_file() or (name and f"def {name.split('[', 1)[0]}(" not in path.read_text()):
            raise pytest.UsageError(f"tests/conftest.py SLOW_TESTS lists {entry}, which does not exist: update the list")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    _check_slow_tests()
    for item in items:
        node = item.nodeid
        listed = any(node == entry or node.startswith((entry + "::", entry + "[")) for entry in SLOW_TESTS)
        if listed or any(item.get_closest_marker(marker) for marker in SLOW_MARKERS):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def test_broker_emptied_first():
    """Each run starts on an empty test broker queue.

    The test broker is a database of its own (`<test database>_broker`, test_settings.py) that stays in var/
    between runs, and each save a transactional test commits queues an embedding. A run without a worker
    (`make test`) leaves those messages behind, and the next run's first worker works them off, about one a
    second, before the job its test waits for: after one `make test`, `make test-slow`'s first worker test
    timed out. They name items of a test database that no longer exists, so nothing is lost. Only that
    database is emptied, never a broker CELERY_BROKER_URL names.
    """
    from urllib.parse import urlsplit

    own_broker = settings.DATABASES["default"]["TEST"]["NAME"] + "_broker"
    if urlsplit(settings.CELERY_BROKER_URL).path.strip("/") == own_broker:
        from knowhub_site.celery import app

        app.control.purge()
    yield


@pytest.fixture(autouse=True)
def default_language():
    """Each test starts in the default language, as a worker or a shell does: a test client's request in Chinese
    leaves its language active in the thread (LocaleMiddleware activates it and nothing resets it), and the messages
    the services raise outside a request (filter errors, search notes) would then come out in Chinese."""
    from django.utils import translation

    translation.deactivate()
    yield
