"""A subscription keeps no more rights than its maker has now: checked at every fan-out and on every change."""
import pytest

from agents.models import AgentToken, AuditEvent
from knowledge import services
from tests.callers import acting, agent_client, person_in, session_client
from webhooks.models import Delivery, Subscription

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("inline_sends")]


def subscribe(client, url, **extra):
    response = client.post("/api/webhooks", {"url": url, "events": ["knowledge.created"], **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def save(committed, scopes=("org:acme",)):
    with committed():
        services.knowledge_create(acting(), task="t", content="c", types=["tool"], scopes=list(scopes))


def test_a_revoked_curator_token_s_subscription_gets_nothing_and_is_paused_with_the_reason(receiver, committed,
                                                                                          django_user_model):
    hook = subscribe(agent_client("curbot", ["org:acme"], can_curate=True), receiver.url)
    save(committed)
    assert len(receiver.received) == 1
    AgentToken.objects.filter(agent_id="curbot").update(is_active=False)
    save(committed)
    assert len(receiver.received) == 1 and Delivery.objects.count() == 1
    sub = Subscription.objects.get(pk=hook["id"])
    assert sub.active is False and "agent:curbot" in sub.paused_reason
    assert "may no longer read these scopes" in sub.paused_reason
    carl = session_client(person_in(django_user_model, "curator", "carl"))
    shown = carl.get(f"/api/webhooks/{hook['id']}").json()
    assert shown["active"] is False and shown["paused_reason"] == sub.paused_reason
    refused = carl.patch(f"/api/webhooks/{hook['id']}", {"active": True}, format="json")  # its maker is still gone
    assert refused.status_code == 409 and "active" in refused.json()["error"]["fields"]


def test_a_token_that_lost_can_curate_or_a_scope_pauses_its_subscription(receiver, committed):
    hook = subscribe(agent_client("curbot", ["org:acme", "org:beta"], can_curate=True), receiver.url,
                     scopes=["org:acme", "org:beta"])
    AgentToken.objects.filter(agent_id="curbot").update(readable_scopes=["org:acme"])
    save(committed)
    assert not receiver.received
    sub = Subscription.objects.get(pk=hook["id"])
    assert not sub.active and "may no longer read these scopes: org:beta" in sub.paused_reason


def test_a_person_who_lost_the_curator_role_or_was_deactivated_gets_nothing(receiver, committed, django_user_model):
    carl_user = person_in(django_user_model, "curator", "carl")
    dora_user = person_in(django_user_model, "curator", "dora")
    carls = subscribe(session_client(carl_user), receiver.url)
    doras = subscribe(session_client(dora_user), receiver.url)
    carl_user.groups.clear()
    django_user_model.objects.filter(pk=dora_user.pk).update(is_active=False)
    save(committed)
    assert not receiver.received and not Delivery.objects.exists()
    for hook, name in ((carls, "user:carl"), (doras, "user:dora")):
        sub = Subscription.objects.get(pk=hook["id"])
        assert not sub.active and f"its maker {name} no longer exists, is inactive or may no longer curate" \
            in sub.paused_reason


def test_a_still_entitled_maker_keeps_getting_events(receiver, committed, django_user_model):
    subscribe(session_client(person_in(django_user_model, "curator", "carl")), receiver.url)
    subscribe(agent_client("curbot", ["org:acme"], can_curate=True), receiver.url)
    save(committed)
    assert len(receiver.received) == 2 and Subscription.objects.filter(active=True).count() == 2


def test_a_person_curator_cannot_widen_a_token_s_subscription_beyond_the_token_s_scopes(receiver, django_user_model):
    hook = subscribe(agent_client("curbot", ["org:acme"], can_curate=True), receiver.url)
    carl = session_client(person_in(django_user_model, "curator", "carl"))
    refused = carl.patch(f"/api/webhooks/{hook['id']}", {"scopes": ["org:acme", "org:other"]}, format="json")
    assert refused.status_code == 403 and "agent:curbot" in refused.json()["error"]["message"]
    assert "org:other" in refused.json()["error"]["message"]
    defaulted = carl.patch(f"/api/webhooks/{hook['id']}", {"scopes": []}, format="json")  # not "every scope"
    assert defaulted.status_code == 200 and defaulted.json()["scopes"] == ["org:acme"]
    assert Subscription.objects.get(pk=hook["id"]).scopes == ["org:acme"]


def test_revealing_the_signing_secret_is_audited_naming_the_subscription(receiver, django_user_model):
    carl = session_client(person_in(django_user_model, "curator", "carl"))
    hook = subscribe(carl, receiver.url)
    assert carl.get(f"/api/webhooks/{hook['id']}").status_code == 200
    assert not AuditEvent.objects.filter(operation="webhook_secret_reveal").exists()  # no reveal, no record
    assert carl.get(f"/api/webhooks/{hook['id']}?reveal=true").json()["secret"] == hook["secret"]
    [event] = AuditEvent.objects.filter(operation="webhook_secret_reveal")
    assert (event.principal, event.target) == ("user:carl", hook["id"])
    assert hook["secret"] not in str(event.args)


def test_webhook_writes_are_audited_with_the_subscription_as_target(receiver, django_user_model):
    carl = session_client(person_in(django_user_model, "curator", "carl"))
    hook = subscribe(carl, receiver.url)
    assert carl.patch(f"/api/webhooks/{hook['id']}", {"description": "ci"}, format="json").status_code == 200
    assert carl.delete(f"/api/webhooks/{hook['id']}").status_code == 200
    targets = dict(AuditEvent.objects.filter(operation__startswith="webhook_").values_list("operation", "target"))
    assert targets == {"webhook_subscribe": hook["id"], "webhook_change": hook["id"], "webhook_delete": hook["id"]}


def test_another_token_of_the_making_agent_with_other_scopes_neither_reads_nor_redirects_its_subscription(receiver):
    maker = agent_client("curbot", ["org:acme"], can_curate=True)
    hook = subscribe(maker, receiver.url)
    elsewhere = agent_client("curbot", ["org:zeta"], can_curate=True)  # the same agent id, another scope

    assert elsewhere.get("/api/webhooks").json()["results"] == []
    assert elsewhere.get(f"/api/webhooks/{hook['id']}?reveal=true").status_code == 404
    moved = elsewhere.patch(f"/api/webhooks/{hook['id']}", {"url": receiver.url + "/hijack"}, format="json")
    assert moved.status_code == 404 and Subscription.objects.get(pk=hook["id"]).url == hook["url"]
    assert elsewhere.delete(f"/api/webhooks/{hook['id']}").status_code == 404
    # a token of the agent reading every scope of the subscription still manages it
    both = agent_client("curbot", ["org:acme", "org:zeta"], can_curate=True)
    assert both.get(f"/api/webhooks/{hook['id']}").status_code == 200
    assert [h["id"] for h in maker.get("/api/webhooks").json()["results"]] == [hook["id"]]


def test_the_signing_secret_is_sent_never_to_be_stored_to_a_token_and_a_session(receiver, django_user_model):
    carl = session_client(person_in(django_user_model, "curator", "carl"))
    token = agent_client("curbot", ["org:acme"], can_curate=True)
    for client in (carl, token):
        created = client.post("/api/webhooks", {"url": receiver.url, "events": ["knowledge.created"]}, format="json")
        assert created.json()["secret"] and "no-store" in created["Cache-Control"]
        revealed = client.get(f"/api/webhooks/{created.json()['id']}?reveal=true")
        assert revealed.json()["secret"] == created.json()["secret"]
        assert "no-store" in revealed["Cache-Control"] and "private" in revealed["Cache-Control"]
        assert {"Authorization", "Cookie"} <= {v.strip() for v in revealed["Vary"].split(",")}
        plain = client.get(f"/api/webhooks/{created.json()['id']}")
        assert "secret" not in plain.json() and "no-store" not in plain.get("Cache-Control", "")
