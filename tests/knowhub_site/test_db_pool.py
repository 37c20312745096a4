"""The pool gauges: each request's statistics reach `knowhub_db_pool_connections`; only changed values are written."""
from unittest import mock

import pytest
from prometheus_client import REGISTRY

from core.metrics import DB_POOL_CONNECTIONS
from knowhub_site import db_pool


@pytest.fixture
def stats():
    current = {"max": 10, "size": 2, "in_use": 1, "idle": 1, "waiting": 0}
    db_pool._recorded.clear()
    with mock.patch.object(db_pool, "pool_stats", lambda: dict(current)):
        yield current
    db_pool._recorded.clear()


def gauge(state: str) -> float:
    return REGISTRY.get_sample_value("knowhub_db_pool_connections", {"state": state})


def test_each_state_of_the_pool_is_a_gauge(stats):
    db_pool.record_pool_use()
    assert {state: gauge(state) for state in stats} == stats


def test_only_a_changed_value_is_written_again(stats):
    db_pool.record_pool_use()
    with mock.patch.object(DB_POOL_CONNECTIONS, "labels", wraps=DB_POOL_CONNECTIONS.labels) as labels:
        db_pool.record_pool_use()
        assert labels.call_count == 0
        stats.update(in_use=2, idle=0)
        db_pool.record_pool_use()
        assert sorted(call.kwargs["state"] for call in labels.call_args_list) == ["idle", "in_use"]
    assert (gauge("in_use"), gauge("idle"), gauge("size")) == (2, 0, 2)
