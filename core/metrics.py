"""The metrics KnowHub exports (Prometheus, `prometheus_client`), declared once for every layer to update.

Under `manage.py serve` every process (gunicorn's web workers, Celery's pool children)
gets PROMETHEUS_MULTIPROC_DIR, so these write to per-process files that `/metrics`
sums at scrape time (knowhub_site/metrics_endpoint.py). Without it (tests, commands)
they live in this process's default registry. Gauges say how processes combine:
`livesum` adds the live processes' values (pool connections in use across web workers).

Values measured at scrape time (queue lengths, embedding backlog) are not here: the
scrape computes them (knowhub_site/metrics_collectors.py).
"""
import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

disable_created_metrics()  # no `_created` series: Prometheus derives nothing from them and they double the lines

# Seconds: from a cached keyword lookup (ms) to an LLM-routed search or a slow job (minutes).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

OPERATION_CALLS = Counter(
    "knowhub_operation_calls", "Registered operations run, by name, entry (rest, ui, mcp, job, internal) and status",
    ["operation", "entry", "status"])
OPERATION_SECONDS = Histogram(
    "knowhub_operation_duration_seconds", "Time an operation took through the filter chain",
    ["operation", "entry"], buckets=LATENCY_BUCKETS)
HTTP_SECONDS = Histogram(
    "knowhub_http_request_duration_seconds", "HTTP requests by resolved URL name, method and status class",
    ["route", "method", "status"], buckets=LATENCY_BUCKETS)
SEARCH_STAGE_SECONDS = Histogram(
    "knowhub_search_stage_duration_seconds", "Search time per stage: embedding, vector, keyword, rerank",
    ["stage"], buckets=LATENCY_BUCKETS)
SEARCH_CACHE = Counter(
    "knowhub_search_cache", "Agent searches by how the result cache answered: hit, miss (the engine ran and its "
    "result was kept), uncached (the engine ran; a write was in flight or a fallback answered), off (setting)",
    ["outcome"])
DB_POOL_CONNECTIONS = Gauge(
    "knowhub_db_pool_connections", "Web processes' psycopg pool: size, in_use, idle, waiting (summed over processes)",
    ["state"], multiprocess_mode="livesum")
JOBS = Counter("knowhub_jobs", "Celery tasks finished, by kind (task name) and outcome (success, failure, retry)",
               ["kind", "outcome"])
JOB_SECONDS = Histogram("knowhub_job_duration_seconds", "Celery task run time by kind", ["kind"],
                        buckets=LATENCY_BUCKETS)
LLM_CALLS = Counter("knowhub_llm_calls", "LLM calls by purpose (the structured-output schema) and outcome",
                    ["purpose", "outcome"])
LLM_TOKENS = Counter("knowhub_llm_tokens", "LLM tokens used, from the reply's usage, by purpose and kind",
                     ["purpose", "kind"])
LLM_SECONDS = Histogram("knowhub_llm_call_duration_seconds", "LLM call time by purpose", ["purpose"],
                        buckets=LATENCY_BUCKETS)
SCRAPE_ERRORS = Counter("knowhub_scrape_errors", "Values /metrics could not read at scrape time, by source",
                        ["source"])


def error_status(exc: BaseException) -> str:
    """The HTTP status an exception leaving an operation is answered with (core.errors), as a label."""
    from django.core.exceptions import ObjectDoesNotExist
    from django.http import Http404

    from core.errors import DATABASE_DOWN

    if isinstance(exc, (Http404, ObjectDoesNotExist)):
        return "404"
    if isinstance(exc, DATABASE_DOWN):
        return "503"
    return str(getattr(exc, "status", None) or getattr(exc, "status_code", None) or 500)


@contextmanager
def timed(histogram: Histogram, **labels: str) -> Iterator[None]:
    """Observe the block's duration (also when it raises)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        histogram.labels(**labels).observe(time.perf_counter() - started)
