"""An operation's refusal on a page: what the view expects is said in place (a form's errors, a card's message, a
404), and whatever it did not expect (a deployment's filter, a rule added to an operation later) is a 4xx with its
reason, never a 500 (a view may also say it as a message after a redirect). Every curation URL that runs a registered operation is walked with each kind of refusal."""
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.exceptions import PermissionDenied, ValidationError

from agents import operations
from agents.chain import ChainError, Error
from curation.urls import urlpatterns
from jobs.models import Job
from knowledge.errors import KnowledgeStateError
from knowledge.models import Conflict
from tests.factories import make_knowledge, make_resource
from webhooks.models import Delivery, Subscription

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("htmx", [False, True])
@pytest.mark.parametrize("number", [0, 7, 2**31])
def test_restoring_a_version_that_cannot_exist_is_a_404_like_one_that_does_not(curator_client, language, htmx, number):
    item = make_knowledge(embed=False)
    headers = {"HTTP_ACCEPT_LANGUAGE": language, **(HX if htmx else {})}
    response = curator_client.post(f"/knowledge/{item.id}/restore/{number}/", **headers)
    assert response.status_code == 404
    item.refresh_from_db()
    assert not item.versions.exists()


def test_resuming_a_webhook_whose_maker_lost_the_role_says_why_on_its_card(curator_client):
    sub = Subscription.objects.create(url="https://8.8.8.8/hook", event_types=["knowledge.created"],
                                      created_by="user:gone", active=False, paused_reason="paused: its maker left")
    response = curator_client.post(f"/webhooks/{sub.id}/resume/", **HX)
    html = response.content.decode()
    assert response.status_code == 409, html[:300]
    assert f'id="webhook-{sub.id}"' in html and 'class="error" role="alert"' in html and "cannot resume" in html
    sub.refresh_from_db()
    assert not sub.active


def test_a_refused_conflict_action_is_said_once(curator_client):
    a, b = make_knowledge(task="Probe", embed=False), make_knowledge(task="Probe too", embed=False)
    first, second = sorted([a.id, b.id])
    conflict = Conflict.objects.create(first_id=first, second_id=second, kind="contradiction", detected_for=b.id)
    response = curator_client.post(f"/conflicts/{conflict.id}/resolve/", {"action": "bogus"}, **HX)
    html = response.content.decode()
    assert response.status_code == 422
    assert html.count("is not a valid choice") == 1, html


# What each curation URL is posted (or got) with to reach its operation; {item}, {job}, ... filled in below.
CALLS_AN_OPERATION = {
    "knowledge_edit": ("post", "/knowledge/{item}/edit/", {"task": "t", "content": "c", "types": ["tool"]}),
    "knowledge_feedback": ("post", "/knowledge/{item}/feedback/", {"kind": "helpful"}),
    "knowledge_score": ("post", "/knowledge/{item}/score/", {"score": "3"}),
    "version_restore": ("post", "/knowledge/{item}/restore/1/", {}),
    "unmerge": ("post", "/knowledge/{item}/unmerge/", {}),
    "knowledge_activate": ("post", "/knowledge/{item}/activate/", {}),
    "evolve_start": ("post", "/knowledge/{item}/evolve/", {"feedback": "shorter"}),
    "evolve_rollback": ("post", "/jobs/{job}/rollback/", {}),
    "evolve_accept": ("post", "/jobs/{job}/accept/", {}),
    "evolve_reject": ("post", "/jobs/{job}/reject/", {}),
    "conflict_resolve": ("post", "/conflicts/{conflict}/resolve/", {"action": "keep_both"}),
    "conflict_reopen": ("post", "/conflicts/{conflict}/reopen/", {}),
    "review_find": ("post", "/review/find/", {}),
    "review_approve": ("post", "/review/approve/", {"ids": "{item},{other}", "task": "t", "content": "c"}),
    "review_reject": ("post", "/review/reject/", {"ids": "{item},{other}"}),
    "resource_detail": ("post", "/resources/{resource}/", {}),  # POST: reveal
    "documents": ("get", "/documents/", {}),
    "document_upload": ("post", "/documents/upload/", {"url": "https://93.184.216.34/a.md", "scopes": "org:acme"}),
    "document_import": ("post", "/documents/import/", {"file": "upload"}),
    "document_detail": ("get", "/documents/{document}/", {}),
    "webhooks": ("get", "/webhooks/", {}),
    "webhook_subscribe": ("post", "/webhooks/subscribe/", {"url": "https://93.184.216.34/h", "events": ["knowledge.created"]}),
    "webhook_pause": ("post", "/webhooks/{webhook}/pause/", {}),
    "webhook_resume": ("post", "/webhooks/{webhook}/resume/", {}),
    "webhook_delete": ("post", "/webhooks/{webhook}/delete/", {}),
    "webhook_secret": ("post", "/webhooks/{webhook}/secret/", {}),
    "webhook_resend": ("post", "/webhooks/{webhook}/deliveries/{delivery}/resend/", {}),
}
CALLS_NONE = {"dashboard", "dashboard_ranking", "knowledge_list", "knowledge_detail", "knowledge_explain",
              "knowledge_reports", "version_diff", "job_status", "review", "conflicts", "resource_list",
              "playground", "audit"}

REFUSALS = [
    ChainError(Error("version: Ensure this value is greater than or equal to 1.", filter="validate_input",
                     fields={"version": ["Ensure this value is greater than or equal to 1."]})),
    ChainError(Error("too many calls", filter="rate_limit", status=429, code="rate_limited", retry_after=1)),
    KnowledgeStateError("no longer pending", field="ids"),
    ValidationError({"ids": ["no pending proposal"]}),
    PermissionDenied("this caller may not write to the scopes of x"),
]


def test_every_curation_url_is_known_to_call_an_operation_or_not():
    names = {p.name for p in urlpatterns}
    assert names == set(CALLS_AN_OPERATION) | CALLS_NONE


@pytest.fixture
def objects():
    item, other = make_knowledge(embed=False), make_knowledge(task="Another", embed=False)
    first, second = sorted([item.id, other.id])
    conflict = Conflict.objects.create(first_id=first, second_id=second, kind="contradiction", detected_for=other.id)
    job = Job.objects.create(kind="evolve", subject=item.id, status="succeeded", requested_by="user:carl")
    hook = Subscription.objects.create(url="https://8.8.8.8/hook", event_types=["knowledge.created"],
                                       created_by="user:ada")
    delivery = Delivery.objects.create(subscription=hook, event_id="msg_1", event_type="knowledge.created",
                                       payload={"type": "knowledge.created", "data": {}}, status="failed", attempts=1)
    make_resource("code/x", secure_body="s3cret")
    return {"item": item.id, "other": other.id, "conflict": conflict.id, "job": job.id, "webhook": hook.id,
            "delivery": delivery.id, "resource": "code/x", "document": uuid.uuid4()}


@pytest.mark.parametrize("name", sorted(CALLS_AN_OPERATION))
def test_every_view_answers_an_operations_refusal_not_with_a_500(admin_client_, objects, monkeypatch, name):
    method, path, data = CALLS_AN_OPERATION[name]
    path = path.format(**objects)
    for refusal in REFUSALS:
        calls = []

        def refuse(operation, caller, *, refusal=refusal, **args):
            calls.append(operation)
            raise refusal

        monkeypatch.setattr(operations, "call", refuse)
        for headers in ({}, HX):
            form = {k: (v.format(**objects) if isinstance(v, str) else v) for k, v in data.items()}
            if form.get("file") == "upload":
                form["file"] = SimpleUploadedFile("export.jsonl", b"{}\n")
            response = getattr(admin_client_, method)(path, form, **headers)
            assert calls, f"{name} did not reach its operation ({response.status_code})"
            assert response.status_code < 500, (name, refusal, response.status_code, response.content[:300])
