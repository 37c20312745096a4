"""Stage 1's statements side by side: the keyword scoring and each writing system's vector walk on lanes of their own.

A search's first stage is a few independent reads (BM25 over the keyword candidates, one HNSW walk per script,
crosslingual.py), each 5-10 ms of PostgreSQL at 100k items; one after the other they were most of an idle search's
time. A web process keeps KNOWHUB_SEARCH_LANES threads, each with a database connection of its own, outside the
request pool (the pool's connections are the requests': a lane holding one would make a request wait for it). A
search hands its statements to free lanes with `soon` and runs the last one itself; with every lane taken, a
statement runs at once in the request's own thread (a busy process, whose cores are taken anyway, searches as it did
one statement after the other).

Only a search outside a transaction uses them: each statement sees what was committed when it started, as it does
one after the other in autocommit (stage 2 reads its rows through the caller's base again, so an item changed
meanwhile is shown as it now is or left out). Inside a transaction (a test's, or a write's) a lane would not see the
transaction's rows: the statements run in the caller's thread. A lane whose connection failed (the database
restarted) closes it, and the statement is run again in the caller's thread, on the pool's checked connection.

Web processes turn the lanes on (wsgi.py, asgi.py); the worker, management commands and tests run without
(0), and the tests that exercise them turn them on and `close()` them.
"""
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connection, connections
from django.db.utils import load_backend

from core.background import Background

_lanes: Background | None = None
_lanes_lock = threading.Lock()
_wrappers: list = []  # the lanes' connections, closed by close()


def _own_connection() -> None:
    """A lane thread's connection: the default database's settings without the pool, kept open between searches."""
    settings_dict = dict(connections.settings[DEFAULT_DB_ALIAS])
    settings_dict["OPTIONS"] = {key: value for key, value in settings_dict.get("OPTIONS", {}).items() if key != "pool"}
    settings_dict["CONN_MAX_AGE"] = None
    wrapper = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, DEFAULT_DB_ALIAS)
    connections[DEFAULT_DB_ALIAS] = wrapper
    _wrappers.append(wrapper)


def _lanes_of_process() -> Background | None:
    global _lanes
    if settings.KNOWHUB_SEARCH_LANES <= 0:
        return None
    with _lanes_lock:  # the first searches of a process come at once: one set of lanes, not one per thread
        if _lanes is None or _lanes.threads != settings.KNOWHUB_SEARCH_LANES:
            _lanes = Background(settings.KNOWHUB_SEARCH_LANES, "knowhub-search-lane", initializer=_own_connection)
        return _lanes


def _on_lane(function: Callable[..., Any], *args) -> tuple[bool, Any]:
    """(True, the result), or (False, None) when the lane's connection failed: it is closed, and the caller runs the
    statement itself."""
    connection.close_if_unusable_or_obsolete()
    try:
        return True, function(*args)
    except (InterfaceError, OperationalError):
        if connection.connection is not None and connection.is_usable():
            raise  # the statement failed (a timeout), not the connection
        connection.close()
        return False, None


def soon(function: Callable[..., Any], *args) -> Callable[[], Any]:
    """Start `function(*args)`, which reads the database, on a free lane; the function returned gives its result.
    With no lane free (or none, or inside a transaction) it is run now, in the caller's thread, as it was before
    lanes: a search's first statement then still runs while its query is embedded."""
    lanes = _lanes_of_process()
    started = None if lanes is None or connection.in_atomic_block else lanes.if_idle(_on_lane, function, *args)
    if started is None:
        value = function(*args)
        done = lambda: value  # noqa: E731
        done.cancel = lambda: False
        return done

    def result() -> Any:
        ran, value = started()
        return value if ran else function(*args)

    result.cancel = started.cancel
    return result


def close() -> None:
    """Stop the lanes and close their connections (tests that turned them on, before their database goes)."""
    global _lanes
    lanes, _lanes = _lanes, None
    if lanes is not None:
        lanes.executor().shutdown(wait=True)
    while _wrappers:
        wrapper = _wrappers.pop()
        wrapper.inc_thread_sharing()  # its thread has ended
        wrapper.close()
