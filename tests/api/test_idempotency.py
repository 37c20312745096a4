"""Idempotency-Key on saves: a retried save returns the first reply and stores nothing new."""
import pytest
from rest_framework.test import APIClient

from agents.models import IdempotentReply
from agents.services import agent_token_create
from knowledge.models import Knowledge
from resources.models import Resource

pytestmark = pytest.mark.django_db

BODY = {"task": "Log in to site A", "content": "Use the test account", "types": ["tool"]}


def client_for(agent_id, scopes):
    _, key = agent_token_create(agent_id=agent_id, readable_scopes=scopes)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_same_key_same_agent_replays_the_first_reply_without_a_second_item():
    agent = client_for("research_agent", ["org:acme"])
    first = agent.post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = agent.post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Knowledge.objects.count() == 1


def test_a_new_key_or_no_key_saves_again():
    agent = client_for("research_agent", ["org:acme"])
    agent.post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    agent.post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    agent.post("/api/knowledge", BODY, format="json")
    assert Knowledge.objects.count() == 3


def test_the_same_key_from_another_agent_is_its_own():
    client_for("a", ["org:acme"]).post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="shared")
    other = client_for("b", ["org:acme"]).post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="shared")
    assert other.status_code == 201 and "Idempotent-Replayed" not in other
    assert Knowledge.objects.count() == 2


def test_reusing_a_key_for_a_different_body_is_409_naming_the_header():
    agent = client_for("research_agent", ["org:acme"])
    agent.post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    response = agent.post("/api/knowledge", {**BODY, "content": "else"}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert response.status_code == 409
    assert "Idempotency-Key" in response.json()["error"]["fields"]
    assert Knowledge.objects.count() == 1


def test_a_failed_save_keeps_no_reply_so_the_key_can_be_retried():
    agent = client_for("research_agent", ["org:acme"])
    bad = agent.post("/api/knowledge", {**BODY, "types": ["gossip"]}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert bad.status_code == 400
    assert not IdempotentReply.objects.exists()
    good = agent.post("/api/knowledge", {**BODY, "types": ["gossip"]}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert good.status_code == 400  # the same bad request fails again rather than replaying anything


def test_resource_saves_honour_the_key_too():
    agent = client_for("research_agent", ["org:acme"])
    body = {"id": "code/selenium/login", "title": "login", "body": "import uc"}
    first = agent.post("/api/resource", body, format="json", HTTP_IDEMPOTENCY_KEY="r-1")
    again = agent.post("/api/resource", body, format="json", HTTP_IDEMPOTENCY_KEY="r-1")
    assert first.status_code == again.status_code == 201
    assert again.json()["version"] == first.json()["version"] == 1
    assert Resource.objects.get().versions.count() == 0


def test_an_overlong_key_is_400():
    agent = client_for("research_agent", ["org:acme"])
    response = agent.post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k" * 201)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["error"]["message"]


def test_replies_older_than_a_day_are_forgotten_by_the_periodic_task():
    from datetime import timedelta

    from django.utils import timezone

    from agents.tasks import forget_idempotent_replies

    agent = client_for("research_agent", ["org:acme"])
    agent.post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="old")
    agent.post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="new")
    IdempotentReply.objects.filter(key="old").update(created_at=timezone.now() - timedelta(hours=25))
    assert forget_idempotent_replies() == 1
    assert list(IdempotentReply.objects.values_list("key", flat=True)) == ["new"]


def test_the_same_key_from_another_token_of_the_same_agent_is_its_own():
    """Two tokens of one agent id may read different scopes: the second token's save with the first's key is
    stored, and it is never shown the first token's item."""
    team_a, team_b = client_for("shared_agent", ["team:a"]), client_for("shared_agent", ["team:b"])
    first = team_a.post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="shared")
    other = team_b.post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="shared")
    assert first.status_code == other.status_code == 201 and "Idempotent-Replayed" not in other
    assert (first.json()["scopes"], other.json()["scopes"]) == (["team:a"], ["team:b"])
    assert Knowledge.objects.count() == 2
    again = team_b.post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="shared")
    assert again["Idempotent-Replayed"] == "true" and again.json() == other.json()


def test_a_reply_stored_before_keys_were_per_token_still_answers_its_agent():
    agent = client_for("research_agent", ["org:acme"])
    first = agent.post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k-old")
    IdempotentReply.objects.update(principal="agent:research_agent")  # as rows were stored before
    again = agent.post("/api/knowledge", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k-old")
    assert again["Idempotent-Replayed"] == "true" and again.json() == first.json()
    assert Knowledge.objects.count() == 1


def test_a_retried_feedback_report_with_the_same_key_counts_once():
    agent = client_for("research_agent", ["org:acme"])
    kid = agent.post("/api/knowledge", BODY, format="json").json()["id"]
    report = {"add_helpful_case": {"task": "login", "outcome": "成功"}, "update_score": 4}
    first = agent.put(f"/api/knowledge/{kid}", report, format="json", HTTP_IDEMPOTENCY_KEY="fb-1")
    again = agent.put(f"/api/knowledge/{kid}", report, format="json", HTTP_IDEMPOTENCY_KEY="fb-1")
    assert first.status_code == again.status_code == 200, first.content
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    item = Knowledge.objects.get(pk=kid)
    assert (item.helpful, item.score, item.feedback_cases.count()) == (1, 4, 1)
    agent.put(f"/api/knowledge/{kid}", report, format="json")  # no key: another report
    assert Knowledge.objects.get(pk=kid).helpful == 2


def test_a_feedback_key_reused_for_another_item_is_409_and_counts_nothing_there():
    agent = client_for("research_agent", ["org:acme"])
    first, second = (agent.post("/api/knowledge", {**BODY, "task": t}, format="json").json()["id"] for t in ("a", "b"))
    report = {"add_harmful_case": {"outcome": "failed"}}
    assert agent.put(f"/api/knowledge/{first}", report, format="json", HTTP_IDEMPOTENCY_KEY="fb-1").status_code == 200
    other = agent.put(f"/api/knowledge/{second}", report, format="json", HTTP_IDEMPOTENCY_KEY="fb-1")
    assert other.status_code == 409 and "Idempotency-Key" in other.json()["error"]["fields"]
    assert Knowledge.objects.get(pk=second).harmful == 0


def test_a_retried_batch_update_with_the_same_key_counts_each_entry_once():
    agent = client_for("research_agent", ["org:acme"])
    kid = agent.post("/api/knowledge", BODY, format="json").json()["id"]
    batch = {"feedback_list": [{"knowledge_id": kid, "is_helpful": True, "case": {"outcome": "ok"}},
                               {"knowledge_id": kid, "is_helpful": False, "case": {"outcome": "slow"}}]}
    first = agent.post("/api/knowledge/batch_update", batch, format="json", HTTP_IDEMPOTENCY_KEY="batch-1")
    again = agent.post("/api/knowledge/batch_update", batch, format="json", HTTP_IDEMPOTENCY_KEY="batch-1")
    assert first.json() == again.json() and first.json()["succeeded"] == 2 and again["Idempotent-Replayed"] == "true"
    item = Knowledge.objects.get(pk=kid)
    assert (item.helpful, item.harmful) == (1, 1)


@pytest.mark.django_db(transaction=True)
def test_two_requests_with_one_key_at_once_store_one_result_and_both_get_its_reply():
    """Both run at once; the second's reply row waits on the first's, finds it committed, and rolls its own work
    back: one item, one reply, the second replayed."""
    import threading

    from django.db import connection

    from agents.idempotency import idempotent_reply
    from knowledge import services
    from tests.callers import acting

    both_running, results, errors = threading.Barrier(2, timeout=10), [], []

    def save(n: int):
        def run():
            item = services.knowledge_create(acting("agent:twin"), task=f"twin {n}", content="c", types=["tool"],
                                             scopes=["org:acme"])
            both_running.wait()
            return 201, {"id": item.id}

        try:
            results.append(idempotent_reply(principal="agent:twin", key="same", operation="knowledge_save",
                                            data=BODY, run=run, token_id=7))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=save, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert sorted(replayed for _, _, replayed in results) == [False, True]
    assert results[0][1] == results[1][1] and Knowledge.objects.count() == 1
    assert Knowledge.objects.get().id == results[0][1]["id"] and IdempotentReply.objects.count() == 1
