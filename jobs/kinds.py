"""Job kinds and the Celery task that runs each: registered by the app that owns the kind.

jobs is a leaf app: it owns the job lifecycle (queue, claim, progress, finish, re-send) but not the
work. The knowledge app registers "evolve" and "slim" at start-up (`KnowledgeConfig.ready`), so
`job_send` can queue any job without jobs importing the apps above it.

A job may be about one subject (an evolve job about one item). Its kind then also registers how to
find the subjects a caller may read (`readable_subjects(readable_scopes)`: a queryset of ids), which
is how a job becomes visible to the readers of its subject without jobs knowing what a subject is. A job
without a subject (slim over the scopes its requester may write) is visible to whoever asked for it while they may
read every scope it works over: the principal alone (`agent:<id>`) is shared by every token of that agent, whatever
each token's scopes.
"""
from typing import Any, Callable

_tasks: dict[str, Any] = {}
_readable_subjects: dict[str, Callable] = {}
_scopes_params: dict[str, str] = {}


def register_job_kind(kind: str, task, *, readable_subjects: Callable | None = None,
                      scopes_param: str | None = None) -> None:
    """`task` is a Celery task taking the job id; registering the same pair again is harmless. A kind without a
    subject names with `scopes_param` the key of its params that lists the scopes a job works over (None: all)."""
    if _tasks.get(kind, task) is not task:
        raise ValueError(f"job kind {kind!r} is registered twice")
    _tasks[kind] = task
    if readable_subjects is not None:
        _readable_subjects[kind] = readable_subjects
    if scopes_param is not None:
        _scopes_params[kind] = scopes_param


def task_for(kind: str):
    try:
        return _tasks[kind]
    except KeyError:
        raise LookupError(f"no task is registered for job kind {kind!r} (known: {', '.join(sorted(_tasks))})") from None


def scopes_params() -> dict[str, str]:
    """Kind → the key of its jobs' params listing the scopes a job works over, for the kinds without a subject."""
    return dict(_scopes_params)


def subject_readers() -> dict[str, Callable]:
    """Kind → `readable_subjects(readable_scopes)` for the kinds whose jobs are about a subject."""
    return dict(_readable_subjects)
