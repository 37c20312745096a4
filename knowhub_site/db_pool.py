"""The web process's psycopg pool use, as `knowhub_db_pool_connections{state}` (summed over web processes).

Updated after each request (request_log.py) and at each scrape, from the pool's own
statistics; a process without a pool (Celery workers, commands, tests) reports nothing.
"""
import logging
import threading

from django.db import connections

from core.metrics import DB_POOL_CONNECTIONS

logger = logging.getLogger(__name__)


def pool_stats() -> dict[str, int] | None:
    """size, in_use, idle and waiting of the default database's pool; None when it has none."""
    wrapper = connections["default"]
    if not wrapper.settings_dict.get("OPTIONS", {}).get("pool"):
        return None
    pool = wrapper.pool  # Django 5.1+: the process's psycopg_pool.ConnectionPool, opened on first use
    if pool is None:
        return None
    stats = pool.get_stats()
    size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
    return {"max": stats.get("pool_max", 0), "size": size, "in_use": max(size - idle, 0), "idle": idle,
            "waiting": stats.get("requests_waiting", 0)}


# What this process's gauges hold, per state. A gauge set in the multiprocess files costs ~14 µs and a request made
# five, most of them to the value already there: only a changed value is written. Compared and set under the lock,
# so that what is remembered is always what the gauge holds.
_recorded: dict[str, int] = {}
_recording = threading.Lock()


def record_pool_use() -> None:
    try:
        stats = pool_stats()
    except Exception:  # noqa: BLE001 - a metric must never fail a request
        logger.debug("pool statistics unavailable", exc_info=True)
        return
    with _recording:
        for state, value in (stats or {}).items():
            if _recorded.get(state) != value:
                DB_POOL_CONNECTIONS.labels(state=state).set(value)
                _recorded[state] = value
