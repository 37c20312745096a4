"""PUT /api/knowledge/{id} and POST /api/knowledge/batch_update (seed 003), and feedback under load."""
import threading

import pytest
from django.db import connection

from knowledge.feedback import feedback_record
from knowledge.models import FeedbackCase, Knowledge
from tests.factories import make_knowledge
from tests.knowledge.test_api_knowledge import client_for
from tests.callers import acting, agent_key, client_with

SEED_PUT_BODY = {
    "add_helpful_case": {"task": "任务描述", "outcome": "成功", "timestamp": "2026-03-05T12:00:00Z"},
    "add_harmful_case": {"task": "任务描述", "outcome": "失败", "reason": "原因", "timestamp": "2026-03-05T12:00:00Z"},
    "update_score": 4,
}


@pytest.fixture
def item(db):
    return make_knowledge(task="Use the staging proxy", scopes=["org:acme"], embed=False)


@pytest.fixture
def acme():
    return client_for("research_agent", ["org:acme"])


@pytest.mark.django_db
def test_seed_put_body_records_both_cases_and_the_score(acme, item):
    response = acme.put(f"/api/knowledge/{item.id}", SEED_PUT_BODY, format="json")
    assert response.status_code == 200, response.json()
    evaluation = response.json()["eval"]
    assert (evaluation["score"], evaluation["helpful"], evaluation["harmful"]) == (4, 1, 1)
    helpful = evaluation["helpful_history"][0]
    sent = {k: v for k, v in SEED_PUT_BODY["add_helpful_case"].items() if k != "timestamp"}
    assert {k: helpful[k] for k in sent} == sent
    assert helpful["reported_by"] == "agent:research_agent"
    assert helpful["timestamp"] > "2026-03-05T12:00:00Z"  # when the server recorded it, not the time sent
    assert evaluation["harmful_history"][0]["reason"] == "原因"


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "field"), [({}, "non_field_errors"), ({"update_score": 7}, "update_score"),
                                             ({"add_helpful_case": "great"}, "add_helpful_case")])
def test_bad_put_bodies_are_400_and_change_nothing(acme, item, body, field):
    response = acme.put(f"/api/knowledge/{item.id}", body, format="json")
    assert response.status_code == 400 and field in response.json()["error"]["fields"]
    item.refresh_from_db()
    assert (item.score, item.helpful, item.harmful) == (3, 0, 0)


@pytest.mark.django_db
def test_other_orgs_cannot_rate_or_rescore_and_learn_nothing(item):
    outsider = client_for("spy", ["org:other"])
    assert outsider.put(f"/api/knowledge/{item.id}", SEED_PUT_BODY, format="json").status_code == 404
    item.refresh_from_db()
    assert (item.score, item.helpful, item.harmful) == (3, 0, 0)
    batch = outsider.post("/api/knowledge/batch_update", {"feedback_list": [{"knowledge_id": item.id, "is_helpful": True}]}, format="json").json()
    assert batch["failed"] == 1 and batch["results"][0]["error"]["code"] == "not_found"
    assert not FeedbackCase.objects.exists()


@pytest.mark.django_db
def test_a_read_only_token_may_report_cases_but_not_change_the_score(item):
    reader = client_for("reader", ["org:acme"], writable_scopes=[])
    assert reader.put(f"/api/knowledge/{item.id}", {"add_helpful_case": {"outcome": "ok"}}, format="json").status_code == 200
    assert reader.put(f"/api/knowledge/{item.id}", {"update_score": 5}, format="json").status_code == 403


@pytest.mark.django_db
def test_evolve_needs_write_access(item):
    reader = client_for("reader", ["org:acme"], writable_scopes=[])
    response = reader.put(f"/api/knowledge/{item.id}", {"evolve_feedback": "be shorter"}, format="json")
    assert response.status_code == 403


@pytest.mark.django_db
def test_batch_update_keeps_the_good_entries_and_says_which_failed(acme, item):
    other = make_knowledge(task="another", scopes=["org:acme"], embed=False)
    body = {"feedback_list": [
        {"knowledge_id": item.id, "is_helpful": True, "case": {"task": "任务描述", "outcome": "成功", "timestamp": "2026-03-05T12:00:00Z"}},
        {"knowledge_id": "knowledge-20990101-none", "is_helpful": True},
        {"knowledge_id": other.id},
        {"knowledge_id": other.id, "is_helpful": False, "case": {"reason": "outdated"}},
    ]}
    response = acme.post("/api/knowledge/batch_update", body, format="json")
    assert response.status_code == 200
    result = response.json()
    assert (result["succeeded"], result["failed"]) == (2, 2)
    assert [r["ok"] for r in result["results"]] == [True, False, False, True]
    assert "is_helpful" in result["results"][2]["error"]["fields"]
    assert Knowledge.objects.get(pk=item.id).helpful == 1 and Knowledge.objects.get(pk=other.id).harmful == 1


@pytest.mark.django_db
def test_batch_update_needs_a_list(acme):
    response = acme.post("/api/knowledge/batch_update", {"feedback_list": []}, format="json")
    assert response.status_code == 400 and "feedback_list" in response.json()["error"]["fields"]


@pytest.mark.django_db(transaction=True)
def test_fifty_threads_of_twenty_cases_lose_nothing():
    item = make_knowledge(task="hot item", embed=False)
    errors = []

    def report(worker):
        try:
            for n in range(20):
                feedback_record(acting(f"agent:w{worker}"), knowledge_id=item.id, helpful=True, case={"worker": worker, "n": n})
        except Exception as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=report, args=(w,)) for w in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    item.refresh_from_db()
    assert item.helpful == 1000
    assert FeedbackCase.objects.filter(knowledge=item, kind="helpful").count() == 1000


def _in_threads(count: int, work) -> list:
    """Run `work(n)` in `count` threads, each on its own database connection; the exceptions raised."""
    errors = []

    def run(n):
        try:
            work(n)
        except Exception as exc:  # noqa: BLE001 - surfaced by the caller
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.mark.django_db(transaction=True)
def test_concurrent_puts_through_the_api_count_every_case_exactly_once():
    item = make_knowledge(task="hot item", scopes=["org:acme"], embed=False)
    key = agent_key("research_agent", ["org:acme"])
    replies = []

    def report(worker):
        client = client_with(key)
        for n in range(10):
            kind = ("helpful", "harmful")[(worker + n) % 2]
            response = client.put(f"/api/knowledge/{item.id}", {f"add_{kind}_case": {"w": worker, "n": n}}, format="json")
            replies.append((response.status_code, response.json()["eval"][kind]))

    assert not _in_threads(12, report)
    assert [status for status, _ in replies] == [200] * 120
    item.refresh_from_db()
    assert (item.helpful, item.harmful) == (60, 60)
    assert FeedbackCase.objects.filter(knowledge=item).count() == 120
    assert max(count for _, count in replies) == 60  # each reply counted the reports committed before it, and its own


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_naming_the_same_items_in_opposite_orders_neither_deadlock_nor_lose_a_report():
    a, b = (make_knowledge(task=task, scopes=["org:acme"], embed=False) for task in ("first", "second"))
    key = agent_key("research_agent", ["org:acme"])
    replies = []

    def report(worker):
        client = client_with(key)
        ids = [a.id, b.id] if worker % 2 else [b.id, a.id]
        for n in range(10):
            response = client.post("/api/knowledge/batch_update", {"feedback_list": [
                {"knowledge_id": kid, "is_helpful": True, "case": {"w": worker, "n": n}} for kid in ids]}, format="json")
            replies.append((response.status_code, response.json().get("succeeded")))

    assert not _in_threads(8, report)
    assert replies == [(200, 2)] * 80
    assert [k.helpful for k in Knowledge.objects.filter(pk__in=[a.id, b.id])] == [80, 80]
    assert FeedbackCase.objects.count() == 160


@pytest.mark.django_db
def test_the_owner_patches_text_and_the_old_text_is_kept_as_a_version(acme):
    from knowledge.models import KnowledgeVersion

    created = acme.post("/api/knowledge", {"task": "old task", "content": "old content", "types": ["tool"], "tags": {"a": "1"}}, format="json").json()
    response = acme.patch(f"/api/knowledge/{created['id']}", {"content": "new content about kubernetes", "reason": "outdated"}, format="json")
    assert response.status_code == 200 and response.json()["content"] == "new content about kubernetes"
    version = KnowledgeVersion.objects.get(knowledge_id=created["id"])
    assert (version.number, version.content, version.task, version.tags) == (1, "old content", "old task", {"a": "1"})
    assert (version.changed_by, version.reason) == ("agent:research_agent", "outdated")
    found = acme.get("/api/knowledge/search", {"q": "kubernetes"}).json()["results"]
    assert [r["id"] for r in found] == [created["id"]]


@pytest.mark.django_db
def test_only_the_owner_may_patch(acme):
    created = acme.post("/api/knowledge", {"task": "t", "content": "c", "types": ["tool"]}, format="json").json()
    colleague = client_for("other_agent", ["org:acme"])
    response = colleague.patch(f"/api/knowledge/{created['id']}", {"task": "hijacked"}, format="json")
    assert response.status_code == 403 and "owner" in response.json()["error"]["message"]
    assert client_for("spy", ["org:other"]).patch(f"/api/knowledge/{created['id']}", {"task": "x"}, format="json").status_code == 404
    assert acme.patch(f"/api/knowledge/{created['id']}", {"reason": "nothing"}, format="json").status_code == 400


@pytest.mark.django_db
def test_writes_are_audited_without_secrets(acme, item):
    from agents.models import AuditEvent

    acme.put(f"/api/knowledge/{item.id}", {"add_helpful_case": {"outcome": "ok"}}, format="json")
    acme.post("/api/resource", {"id": "credentials/x", "title": "x", "secure_body": "hunter2-secret"}, format="json")
    acme.get("/api/knowledge/search", {"q": "proxy"})  # reads are not audited
    events = list(AuditEvent.objects.order_by("id"))
    assert [(e.operation, e.target, e.principal) for e in events] == [
        ("knowledge_update", item.id, "agent:research_agent"),
        ("resource_save", "credentials/x", "agent:research_agent"),
    ]
    assert "hunter2-secret" not in str(events[1].args) and events[1].args["secure_body"] == "[secret]"


@pytest.mark.django_db
def test_a_case_cannot_name_another_reporter_or_an_earlier_time(item):
    """Who reported a case and when are the caller and the server's clock, in PUT and batch_update alike: a read-only
    agent's case claiming to be a curator's, years ago, is recorded as its own, now."""
    from django.utils import timezone

    reader = client_for("agent_ro", ["org:acme"], writable_scopes=[])
    forged = {"task": "it broke prod", "reported_by": "user:curator", "timestamp": "2001-01-01T00:00:00Z"}
    before = timezone.now().isoformat().replace("+00:00", "Z")
    put = reader.put(f"/api/knowledge/{item.id}", {"add_harmful_case": forged}, format="json")
    assert put.status_code == 200, put.json()
    batch = reader.post("/api/knowledge/batch_update", {"feedback_list": [
        {"knowledge_id": item.id, "is_helpful": False, "case": {**forged, "reported_by": "agent:trusted_bot"}}]},
        format="json")
    assert batch.json()["succeeded"] == 1
    history = reader.get(f"/api/knowledge/{item.id}").json()["eval"]["harmful_history"]
    assert put.json()["eval"]["harmful_history"][-1] == history[0]
    assert [(case["task"], case["reported_by"]) for case in history] == [("it broke prod", "agent:agent_ro")] * 2
    assert all(case["timestamp"] >= before[:19] for case in history)
    assert set(FeedbackCase.objects.values_list("reported_by", flat=True)) == {"agent:agent_ro"}
