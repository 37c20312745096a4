"""Job kinds and the Celery task that runs each: registered by the app that owns the kind.

jobs is a leaf app: it owns the job lifecycle (queue, claim, progress, finish, re-send) but not the
work. The knowledge app registers "evolve" and "slim" at start-up (`KnowledgeConfig.ready`), so
`job_send` can queue any job without jobs importing the apps above it.
"""
from typing import Any

_tasks: dict[str, Any] = {}


def register_job_kind(kind: str, task) -> None:
    """`task` is a Celery task taking the job id; registering the same pair again is harmless."""
    if _tasks.get(kind, task) is not task:
        raise ValueError(f"job kind {kind!r} is registered twice")
    _tasks[kind] = task


def task_for(kind: str):
    try:
        return _tasks[kind]
    except KeyError:
        raise LookupError(f"no task is registered for job kind {kind!r} (known: {', '.join(sorted(_tasks))})") from None
