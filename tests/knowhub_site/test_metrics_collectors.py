"""Scrape-time values: the Celery queue length from each kind of broker, and processes that exited."""
import os
import subprocess
import sys
import time

import pytest
import redis
from django.test import override_settings

from knowhub_site.metrics_endpoint import exposition
from tests.metrics_scrape import value

REDIS_BROKER = "redis://127.0.0.1:6379/15"


@pytest.mark.django_db
@override_settings(CELERY_BROKER_URL=REDIS_BROKER)
def test_the_queue_length_of_a_redis_broker_is_its_list_length():
    queue = redis.Redis.from_url(REDIS_BROKER)
    queue.delete("celery")
    queue.lpush("celery", "m1", "m2", "m3")
    try:
        assert value(exposition().decode(), "knowhub_celery_queue_length", queue="celery") == 3
    finally:
        queue.delete("celery")


@pytest.mark.django_db
@override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0")
def test_an_unreachable_broker_is_a_scrape_error_within_seconds():
    before = value(exposition().decode(), "knowhub_scrape_errors_total", source="broker")
    started = time.monotonic()
    text = exposition().decode()
    assert time.monotonic() - started < 15
    assert value(text, "knowhub_scrape_errors_total", source="broker") >= before + 1
    assert "knowhub_embedding_backlog" in text


@pytest.mark.django_db
def test_the_pool_gauges_of_a_process_that_exited_leave_the_sum(tmp_path):
    code = ("from core.metrics import DB_POOL_CONNECTIONS as g; g.labels(state='max').set(10)")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    assert list(tmp_path.glob("gauge_livesum_*.db"))
    assert value(exposition(str(tmp_path)).decode(), "knowhub_db_pool_connections", state="max") == 0
    assert not list(tmp_path.glob("gauge_livesum_*.db"))
