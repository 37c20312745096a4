"""One log line and the job metrics per Celery task, under the request id of the request that queued it.

`before_task_publish` (in whichever process sends: a web process, the worker's beat) puts
the current request id in the message's headers; `task_prerun` (in the pool child) makes
it the job's context, so the job's log lines carry it; `task_postrun` logs kind, job id,
duration and outcome and counts `knowhub_jobs{kind,outcome}` and
`knowhub_job_duration_seconds{kind}`. Connected by knowhub_site/celery.py.
"""
import inspect
import logging
import time

from celery import signals

from core import metrics, request_context

logger = logging.getLogger("knowhub.job")

HEADER = "knowhub_request_id"
_running: dict[str, tuple[float, object]] = {}  # task id -> (start, the contextvar token to reset)


def kind_of(task_name: str | None) -> str:
    return (task_name or "unknown").rsplit(".", 1)[-1]


def _job_id(task, args, kwargs) -> str | None:
    """The task's `job_id` argument, for the tasks that run a Job (evolve, slim, ingest)."""
    try:
        bound = inspect.signature(task.run).bind_partial(*(args or ()), **(kwargs or {}))
    except (TypeError, ValueError):
        return None
    value = bound.arguments.get("job_id")
    return str(value) if value is not None else None


@signals.before_task_publish.connect
def _send_request_id(sender=None, headers=None, **kwargs):
    found = request_context.current()
    if found is not None and headers is not None:
        headers[HEADER] = found.request_id


def _incoming_request_id(task) -> str | None:
    request = task.request
    value = getattr(request, HEADER, None) or (getattr(request, "headers", None) or {}).get(HEADER)
    return value if isinstance(value, str) else None


@signals.task_prerun.connect
def _job_started(task_id=None, task=None, **kwargs):
    context = request_context.Context(request_id=request_context.request_id_from(_incoming_request_id(task)), entry="job")
    _running[task_id] = (time.perf_counter(), request_context.enter(context))


@signals.task_postrun.connect
def _job_finished(task_id=None, task=None, args=None, kwargs=None, state=None, **extra):
    started, token = _running.pop(task_id, (None, None))
    try:
        if started is None:
            return
        context = request_context.current()
        elapsed = time.perf_counter() - started
        kind, outcome = kind_of(task.name), (state or "unknown").lower()
        metrics.JOBS.labels(kind=kind, outcome=outcome).inc()
        metrics.JOB_SECONDS.labels(kind=kind).observe(elapsed)
        level = logging.WARNING if outcome == "failure" else logging.INFO
        logger.log(level, "job %s %s", kind, outcome, extra={"event": {
            "event": "job", "request_id": context.request_id if context else None, "task": task.name, "kind": kind, "task_id": task_id, "job_id": _job_id(task, args, kwargs),
            "duration_ms": round(elapsed * 1000, 1), "outcome": outcome,
        }})
    finally:
        if token is not None:
            request_context.leave(token)
