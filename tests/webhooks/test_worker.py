"""Through the real Celery worker: an agent's save reaches a receiver on loopback, retried after a 500."""
import pytest

from tests.callers import agent_client, person_in, session_client
from tests.conftest import CeleryWorker, wait_for
from tests.webhooks.receiver import Receiver, signature_valid
from webhooks.models import Delivery


@pytest.mark.django_db(transaction=True)
def test_the_real_worker_delivers_a_save_signed_and_retries_after_a_500(django_user_model, django_db_blocker,
                                                                        settings):
    settings.KNOWHUB_WEBHOOK_ALLOW = ["127.0.0.1"]  # this process checks the URL at subscribe time
    carl = session_client(person_in(django_user_model, "curator", "carl"))
    with Receiver(statuses=[500, 200]) as receiver:
        hook = carl.post("/api/webhooks", {"url": receiver.url, "events": ["knowledge.created"]}, format="json").json()
        worker = CeleryWorker(name="webhook-worker", extra_env={
            "KNOWHUB_WEBHOOK_ALLOW": "127.0.0.1", "KNOWHUB_WEBHOOK_RETRY_DELAYS": "1,1"}).start()
        try:
            saved = agent_client("writer", ["org:acme"]).post("/api/knowledge", {
                "task": "Rotate the staging keys", "content": "Monthly.", "types": ["strategy"]}, format="json").json()
            delivery = wait_for(lambda: Delivery.objects.filter(status="succeeded").first(), timeout=120,
                                message="the worker to deliver the event")
        finally:
            worker.stop()
    assert delivery.attempts == 2 and delivery.response_status == 200
    first, second = receiver.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == delivery.event_id
    assert signature_valid(hook["secret"], second.headers, second.body)
    assert second.json["data"]["knowledge_id"] == saved["id"]
