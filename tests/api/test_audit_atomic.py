"""A write and its audit row land together or not at all; the client is told exactly what landed (issue 12, item 5)."""
import json

import pytest

from agents.audit import MAX_ARG_CHARS, audit_summary
from agents.caller import Caller
from agents.chain import Continue, Filter, registered_temporarily
from agents.models import AgentToken, AuditEvent
from knowledge.operations.agents import knowledge_batch_update
from knowledge.models import FeedbackCase, Knowledge
from resources.models import Resource
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db

SAVE = {"task": "Log in", "content": "Use the test account", "types": ["tool"]}


def audit_that_the_database_refuses(ctx):
    AuditEvent.objects.create(principal="x\x00", operation=ctx["operation"], target="", args={})
    return Continue(ctx)


BROKEN_AUDIT = Filter("broken_audit", "post_invocation", audit_that_the_database_refuses, priority=200)


@pytest.mark.parametrize("url, body", [
    ("/api/knowledge", SAVE),
    ("/api/resource", {"id": "code/login", "title": "login", "body": "print(1)"}),
])
def test_a_failing_post_filter_rolls_the_write_back_and_the_client_gets_a_clean_503(agent, url, body):
    with registered_temporarily(BROKEN_AUDIT):
        response = agent.post(url, body, format="json")
    error = response.json()["error"]
    assert response.status_code == 503 and error["code"] == "filter_failed"
    assert error["message"] == "broken_audit: filter broken_audit failed: DataError"  # no SQL, no values
    assert not Knowledge.objects.exists() and not Resource.objects.exists() and not AuditEvent.objects.exists()


def audit_while_the_database_is_away(ctx):
    from django.db import OperationalError

    raise OperationalError("server closed the connection unexpectedly")


AWAY_AUDIT = Filter("away_audit", "post_invocation", audit_while_the_database_is_away, priority=200)


def test_the_database_going_away_under_a_filter_is_the_apis_503_unavailable_with_retry_after(agent):
    with registered_temporarily(AWAY_AUDIT):
        response = agent.post("/api/knowledge", SAVE, format="json")
    assert response.status_code == 503 and response.json()["error"]["code"] == "unavailable"
    assert response["Retry-After"]
    assert not Knowledge.objects.exists()  # the save went back with it


def test_a_rolled_back_save_frees_its_idempotency_key_for_the_retry(agent):
    with registered_temporarily(BROKEN_AUDIT):
        failed = agent.post("/api/knowledge", SAVE, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    retried = agent.post("/api/knowledge", SAVE, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert failed.status_code == 503 and retried.status_code == 201 and "Idempotent-Replayed" not in retried
    assert Knowledge.objects.count() == 1
    assert list(AuditEvent.objects.values_list("operation", "target")) == [("knowledge_save", retried.json()["id"])]


def test_a_failing_post_filter_rolls_back_feedback_too(agent):
    item = make_knowledge()
    with registered_temporarily(BROKEN_AUDIT):
        response = agent.put(f"/api/knowledge/{item.id}", {"add_helpful_case": {"task": "t"}, "update_score": 5},
                             format="json")
    assert response.status_code == 503
    item.refresh_from_db()
    assert not FeedbackCase.objects.exists() and item.helpful == 0 and item.score != 5


def test_a_batch_lands_and_audits_its_good_entries_and_reports_each_bad_one(agent):
    item = make_knowledge()
    feedback = [
        {"knowledge_id": item.id, "is_helpful": True, "case": {"task": "worked"}},
        {"knowledge_id": "knowledge-20990101-none", "is_helpful": True},
        {"knowledge_id": item.id, "is_helpful": "maybe"},
    ]
    response = agent.post("/api/knowledge/batch_update", {"feedback_list": feedback}, format="json")
    body = response.json()
    assert response.status_code == 200 and (body["succeeded"], body["failed"]) == (1, 2)
    assert [r["ok"] for r in body["results"]] == [True, False, False]
    assert body["results"][1]["error"]["code"] == "not_found"
    assert FeedbackCase.objects.count() == 1
    event = AuditEvent.objects.get()
    assert event.operation == "knowledge_batch_update" and len(event.args["feedback_list"]) == 3


def test_an_entry_the_database_refuses_is_reported_and_the_others_still_land(agent):
    """The handler on its own (as a deployment filter might hand it any value): one savepoint per entry."""
    item = make_knowledge()
    caller = Caller.for_token(AgentToken.objects.get())
    feedback = [{"knowledge_id": item.id, "is_helpful": True, "case": {"note": "fine"}},
                {"knowledge_id": item.id, "is_helpful": True, "case": {"note": "nul \x00"}},
                {"knowledge_id": item.id, "is_helpful": False, "case": {"note": "also fine"}}]
    body = knowledge_batch_update(caller, feedback_list=feedback)
    assert [r["ok"] for r in body["results"]] == [True, False, True]
    assert "not stored" in body["results"][1]["error"]["message"]
    assert sorted(c.case["note"] for c in FeedbackCase.objects.all()) == ["also fine", "fine"]


def test_the_audit_summary_of_hostile_args_is_bounded_and_storable(agent):
    deep = "leaf"
    for _ in range(5_000):
        deep = [deep]
    args = {"data": {"nul\x00key": "a\x00b\ud800", "deep": deep, "wide": list(range(100_000)),
                     "long": "x" * 100_000, "secure_body": "s3cret", "big": 10 ** 30}}
    summary = audit_summary(args)
    text = json.dumps(summary)
    assert "\\u0000" not in text and "s3cret" not in text and len(text) < 50_000
    assert summary["data"]["nul\ufffdkey"] == "a\ufffdb\ufffd"
    assert len(summary["data"]["wide"]) == 50 and len(summary["data"]["long"]) == MAX_ARG_CHARS + 1
    AuditEvent.objects.create(principal="p", operation="o", target="", args=summary)  # PostgreSQL takes it


def test_a_save_whose_args_have_odd_characters_is_audited(agent):
    response = agent.post("/api/knowledge", {**SAVE, "content": "tab\tand \u2028 and emoji \U0001F600"}, format="json")
    assert response.status_code == 201
    assert AuditEvent.objects.get().args["content"].endswith("\U0001F600")
