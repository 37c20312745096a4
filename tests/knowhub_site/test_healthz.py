import pytest
from django.test import override_settings

from jobs.models import WorkerHeartbeat
from tests.conftest import CeleryWorker, wait_for


def worker_alive():
    return WorkerHeartbeat.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_healthz_is_ok_with_a_real_worker_running(client, celery_worker):
    wait_for(worker_alive, timeout=60, message="the worker's first heartbeat")
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok" and body["down"] == []
    assert body["checks"]["pgvector"]["detail"].startswith("pgvector 0.8")
    assert body["checks"]["worker"]["workers"] == [WorkerHeartbeat.objects.get().hostname]


@pytest.mark.django_db(transaction=True)
def test_a_stopped_worker_clears_its_heartbeat_and_healthz_names_it(client):
    worker = CeleryWorker(name="short-lived").start()
    try:
        wait_for(worker_alive, timeout=60, message="the worker's first heartbeat")
    finally:
        assert worker.stop() == 0
    assert not WorkerHeartbeat.objects.exists()
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["down"] == ["worker"]


@pytest.mark.django_db
def test_healthz_names_a_stale_worker_as_down(client):
    from datetime import timedelta

    from django.utils import timezone

    long_ago = timezone.now() - timedelta(minutes=5)
    WorkerHeartbeat.objects.create(hostname="gone@host", pid=1, started_at=long_ago, last_seen=long_ago)
    body = client.get("/healthz").json()
    assert body["down"] == ["worker"]
    assert "no Celery worker has reported" in body["checks"]["worker"]["detail"]


@pytest.mark.django_db
@override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0")
def test_healthz_names_an_unreachable_broker(client):
    response = client.get("/healthz")
    assert response.status_code == 503
    assert "broker" in response.json()["down"]
    assert response.json()["checks"]["database"]["ok"] is True


@pytest.mark.django_db
@override_settings(CELERY_BROKER_URL="redis://127.0.0.1:6379/15")
def test_healthz_reaches_a_redis_broker(client):
    body = client.get("/healthz").json()
    assert body["checks"]["broker"] == {"ok": True, "detail": "redis broker reachable"}


@pytest.mark.django_db(transaction=True)
def test_a_worker_on_redis_reports_in(client):
    worker = CeleryWorker(name="redis-worker", broker_url="redis://127.0.0.1:6379/15").start()
    try:
        wait_for(worker_alive, timeout=60, message="a heartbeat from the Redis-brokered worker")
    finally:
        worker.stop()


@pytest.mark.django_db
def test_healthz_answers_get_and_head_only(client):
    assert client.post("/healthz").status_code == 405
    assert client.head("/healthz").status_code == client.get("/healthz").status_code  # uptime checks send HEAD


@pytest.mark.django_db
def test_healthz_names_a_model_service_that_does_not_answer(client, settings, tmp_path):
    settings.KNOWHUB_MODEL_SERVICE = str(tmp_path / "nobody.sock")
    body = client.get("/healthz").json()
    assert "models" in body["down"]
    assert "not answering" in body["checks"]["models"]["detail"]


@pytest.mark.django_db
def test_healthz_says_models_load_in_process_without_a_service(client, settings):
    settings.KNOWHUB_MODEL_SERVICE = ""
    assert client.get("/healthz").json()["checks"]["models"] == {
        "ok": True, "detail": "models load in each process (KNOWHUB_MODEL_SERVICE unset)"}
