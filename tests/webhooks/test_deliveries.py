"""Webhooks end to end in-process: real services emit events, deliveries are signed and POSTed to a receiver on
loopback, retried, logged, paused after repeated failures, re-sent; URLs and scopes are checked."""
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge import feedback, services
from jobs import services as job_services
from jobs.models import Job
from resources.tasks import announce_expiring_resources
from tests.callers import acting, agent_client, person_in, session_client
from tests.factories import make_knowledge, make_resource
from tests.ingest.trickle import Trickler, fetch_threads
from tests.webhooks.receiver import Receiver, signature_valid
from webhooks.models import Delivery, Subscription

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("inline_sends")]

SAVE = {"task": "Rotate the staging keys", "content": "Monthly; revoke the old key a day later.", "types": ["strategy"],
        "scopes": ["org:acme"]}


@pytest.fixture
def carl(django_user_model):
    return session_client(person_in(django_user_model, "curator", "carl"))


def subscribe(client, url, events=("knowledge.created",), **extra):
    response = client.post("/api/webhooks", {"url": url, "events": list(events), **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_a_save_through_the_api_is_delivered_signed_and_the_receiver_verifies_the_signature(carl, receiver, committed):
    hook = subscribe(carl, receiver.url, scopes=["org:acme"])
    assert hook["secret"].startswith("whsec_") and "secret" not in carl.get("/api/webhooks").json()["results"][0]
    with committed():
        saved = agent_client("writer", ["org:acme"]).post("/api/knowledge", SAVE, format="json").json()

    [request] = receiver.received
    assert signature_valid(hook["secret"], request.headers, request.body)
    assert not signature_valid("whsec_" + "A" * 32, request.headers, request.body)
    assert request.headers["webhook-id"].startswith("msg_")
    assert abs(int(request.headers["webhook-timestamp"]) - timezone.now().timestamp()) < 60
    body = request.json
    assert body["type"] == "knowledge.created"
    assert body["data"]["knowledge_id"] == saved["id"] and body["data"]["task"] == SAVE["task"]
    assert body["data"]["scopes"] == ["org:acme"] and body["data"]["by"] == "agent:writer"
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("succeeded", 1, 200)
    assert delivery.response_body == "answered 200" and delivery.event_id == request.headers["webhook-id"]


def test_a_delivery_answered_500_is_retried_with_the_same_id_and_then_succeeds(carl, committed):
    with Receiver(statuses=[500, 200]) as receiver:
        subscribe(carl, receiver.url)
        with committed():
            services.knowledge_create(acting(), task="t", content="c", types=["tool"], scopes=["org:acme"])
    first, second = receiver.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert first.body == second.body
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.response_status, delivery.error) == ("succeeded", 2, 200, "")
    assert Subscription.objects.get().consecutive_failures == 0


def test_repeated_failures_pause_the_subscription_with_a_reason_and_resume_clears_it(carl, committed):
    with Receiver(statuses=[500]) as receiver:
        hook = subscribe(carl, receiver.url)
        for n in range(3):  # KNOWHUB_WEBHOOK_PAUSE_AFTER = 3 in these tests; each delivery tried 3 times
            with committed():
                services.knowledge_create(acting(), task=f"t{n}", content="c", types=["tool"], scopes=["org:acme"])
        assert len(receiver.received) == 9
        shown = carl.get(f"/api/webhooks/{hook['id']}").json()
        assert shown["active"] is False and shown["consecutive_failures"] == 3
        assert "paused after 3 failed deliveries" in shown["paused_reason"] and "HTTP 500" in shown["paused_reason"]
        assert [d["status"] for d in shown["deliveries"]] == ["failed"] * 3
        assert shown["deliveries"][0]["attempts"] == 3 and shown["deliveries"][0]["response_status"] == 500

        with committed():  # paused: nothing is sent
            services.knowledge_create(acting(), task="t4", content="c", types=["tool"], scopes=["org:acme"])
        assert len(receiver.received) == 9 and Delivery.objects.count() == 3

        resumed = carl.patch(f"/api/webhooks/{hook['id']}", {"active": True}, format="json").json()
        assert (resumed["active"], resumed["paused_reason"], resumed["consecutive_failures"]) == (True, "", 0)


def test_resend_makes_a_new_attempt_of_a_failed_delivery_with_the_same_event_id(carl, committed, webhook_settings):
    webhook_settings.KNOWHUB_WEBHOOK_RETRY_DELAYS = []
    with Receiver(statuses=[503, 200]) as receiver:
        hook = subscribe(carl, receiver.url)
        with committed():
            services.knowledge_create(acting(), task="t", content="c", types=["tool"], scopes=["org:acme"])
        delivery = Delivery.objects.get()
        assert (delivery.status, delivery.attempts, delivery.response_status) == ("failed", 1, 503)
        with committed():
            response = carl.post(f"/api/webhooks/{hook['id']}/deliveries/{delivery.id}/resend")
        assert response.status_code == 202
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("succeeded", 2, 200)
    assert receiver.received[0].headers["webhook-id"] == receiver.received[1].headers["webhook-id"]
    assert signature_valid(hook["secret"], receiver.received[1].headers, receiver.received[1].body)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/hook", "http://10.1.2.3/hook", "http://169.254.169.254/latest",
                                 "http://[::1]/hook", "file:///etc/passwd", "http://user:pw@example.com/"])
def test_private_and_unsafe_urls_are_refused_with_a_400_naming_url(carl, webhook_settings, url):
    webhook_settings.KNOWHUB_WEBHOOK_ALLOW = []
    response = carl.post("/api/webhooks", {"url": url, "events": ["knowledge.created"]}, format="json")
    assert response.status_code == 400, response.content
    assert "url" in response.json()["error"]["fields"]
    assert not Subscription.objects.exists()


@pytest.mark.parametrize("url, refusal", [("http://127.0.0.2:99999/", "Invalid port: 99999 (a port is 1 to 65535)"),
                                          ("http://host:0/", "Invalid port: 0 ("),
                                          ("http://127.0.0.1:0/hook", "Invalid port: 0 ("),
                                          ("http://127.0.0.1:65536/hook", "Invalid port: 65536 ("),
                                          ("http://127.0.0.1:-1/hook", "Invalid port: -1 ("),
                                          ("http://127.0.0.1:8o/hook", "Invalid port: '8o'")])
def test_urls_with_a_port_outside_1_to_65535_or_an_unparseable_one_are_refused_with_a_400_naming_url(
        carl, webhook_settings, url, refusal):
    webhook_settings.KNOWHUB_WEBHOOK_ALLOW = ["127.0.0.0/8", "host"]
    response = carl.post("/api/webhooks", {"url": url, "events": ["knowledge.created"]}, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert list(error["fields"]) == ["url"], error
    assert error["fields"]["url"][0].startswith(f"'{url}' is not a valid URL: {refusal}"), error
    assert not Subscription.objects.exists()
    hook = subscribe(carl, "http://127.0.0.1:65535/hook")  # the ports at either end are fine
    changed = carl.patch(f"/api/webhooks/{hook['id']}", {"url": url}, format="json")
    assert changed.status_code == 400 and "url" in changed.json()["error"]["fields"]
    assert carl.patch(f"/api/webhooks/{hook['id']}", {"url": "http://127.0.0.2:1/"}, format="json").status_code == 200


def test_a_receiver_trickling_its_headers_times_out_and_its_connection_is_closed_at_the_deadline(carl, committed,
                                                                                                 webhook_settings):
    webhook_settings.KNOWHUB_WEBHOOK_TIMEOUT_SECONDS = 1
    webhook_settings.KNOWHUB_WEBHOOK_RETRY_DELAYS = []
    before = set(fetch_threads())
    with Trickler(every=0.3, duration=10) as server:
        subscribe(carl, f"{server.url}/hook")
        with committed():
            services.knowledge_create(acting(), task="t", content="c", types=["tool"], scopes=["org:acme"])
        delivery = Delivery.objects.get()
        assert delivery.status == "failed" and "timed out after 1 seconds" in delivery.error
        assert set(fetch_threads()) <= before  # the sending thread is finished, not left running
        assert server.closed.wait(1.5), "the connection is still open"
        [closed_after] = server.closed_after  # seconds from the connection's accept to its close
        assert closed_after is not None and closed_after < 2.5


def test_an_allow_listed_url_that_is_no_longer_allowed_is_refused_again_when_sending(carl, receiver, committed,
                                                                                      webhook_settings):
    subscribe(carl, receiver.url)
    webhook_settings.KNOWHUB_WEBHOOK_ALLOW = []
    webhook_settings.KNOWHUB_WEBHOOK_RETRY_DELAYS = []
    with committed():
        services.knowledge_create(acting(), task="t", content="c", types=["tool"], scopes=["org:acme"])
    assert not receiver.received
    delivery = Delivery.objects.get()
    assert delivery.status == "failed" and "loopback" in delivery.error and delivery.response_status is None


def test_an_event_in_a_scope_the_subscriber_cannot_read_is_not_delivered(receiver, committed):
    bot = agent_client("curbot", ["org:acme"], can_curate=True)
    refused = bot.post("/api/webhooks", {"url": receiver.url, "events": ["knowledge.created"],
                                         "scopes": ["org:other"]}, format="json")
    assert refused.status_code == 403 and "org:other" in refused.json()["error"]["message"]
    hook = subscribe(bot, receiver.url)
    assert hook["scopes"] == ["org:acme"]  # a token's default: the scopes it reads
    with committed():
        services.knowledge_create(acting(), task="other's", content="c", types=["tool"], scopes=["org:other"])
        services.knowledge_create(acting(), task="ours", content="c", types=["tool"], scopes=["org:acme", "org:x"])
    assert [r.json["data"]["task"] for r in receiver.received] == ["ours"]


def test_a_curator_token_sees_only_its_own_subscriptions_and_a_person_sees_all(carl, receiver):
    mine = subscribe(agent_client("curbot", ["org:acme"], can_curate=True), receiver.url)
    other_bot = agent_client("otherbot", ["org:acme"], can_curate=True)
    assert other_bot.get("/api/webhooks").json()["count"] == 0
    assert other_bot.get(f"/api/webhooks/{mine['id']}").status_code == 404
    assert other_bot.delete(f"/api/webhooks/{mine['id']}").status_code == 404
    assert carl.get("/api/webhooks").json()["count"] == 1
    assert carl.get(f"/api/webhooks/{mine['id']}?reveal=true").json()["secret"] == mine["secret"]


def test_edit_feedback_archive_and_merge_are_announced_to_subscribers_of_those_events(carl, receiver, committed):
    subscribe(carl, receiver.url, events=["knowledge.updated", "feedback.received", "knowledge.archived",
                                          "knowledge.merged"])
    item, twin = make_knowledge(scopes=["org:acme"]), make_knowledge(scopes=["org:acme"])
    with committed():
        services.knowledge_edit(acting(), knowledge_id=item.id, content="better text", reason="clearer")
        feedback.feedback_record(acting("agent:a"), knowledge_id=item.id, helpful=False, case={"note": "secret-ish"})
        services.knowledge_set_status(acting(), knowledge_id=twin.id, status="archived")
    received = {r.json["type"]: r.json["data"] for r in receiver.received}
    assert received["knowledge.updated"]["changed"] == ["content"] and received["knowledge.updated"]["reason"] == "clearer"
    assert received["feedback.received"] == {"knowledge_id": item.id, "kind": "harmful", "reported_by": "agent:a",
                                             "search_id": None}
    assert received["knowledge.archived"]["knowledge_id"] == twin.id
    assert "secret-ish" not in str([r.body for r in receiver.received])


def test_job_finished_reaches_readers_of_the_jobs_item_only(receiver, committed):
    acme = subscribe(agent_client("curbot", ["org:acme"], can_curate=True), receiver.url, events=["job.finished"])
    outsider_hook = subscribe(agent_client("otherbot", ["org:other"], can_curate=True), receiver.url,
                              events=["job.finished"])
    item = make_knowledge(scopes=["org:acme"])
    job = Job.objects.create(kind="evolve", subject=item.id, requested_by="agent:writer", status="running")
    with committed():
        job_services.job_fail(job_id=job.id, error="the LLM said no")
    [request] = receiver.received
    assert request.json["data"] == {"job_id": str(job.id), "kind": "evolve", "status": "failed", "subject": item.id,
                                    "requested_by": "agent:writer", "error": "the LLM said no"}
    assert Delivery.objects.get().subscription_id.hex == acme["id"].replace("-", "")
    assert not Delivery.objects.filter(subscription_id=outsider_hook["id"]).exists()


def test_a_resource_expiring_soon_is_announced_once_without_its_secret(carl, receiver, committed):
    subscribe(carl, receiver.url, events=["resource.expiring"])
    make_resource("cookies/site", scopes=["org:acme"], secure_body="SECRET-COOKIE",
                  expires_at=timezone.now() + timedelta(days=1))
    make_resource("cookies/later", scopes=["org:acme"], expires_at=timezone.now() + timedelta(days=30))
    for _ in range(2):  # every periodic check announces it; one delivery per expiry
        with committed():
            announce_expiring_resources()
    [request] = receiver.received
    assert request.json["data"]["resource_id"] == "cookies/site"
    assert b"SECRET-COOKIE" not in request.body


def test_a_bulk_save_announces_each_new_item(carl, receiver, committed):
    subscribe(carl, receiver.url)
    items = [{**SAVE, "task": f"Tip {n}"} for n in range(3)]
    with committed():
        reply = agent_client("writer", ["org:acme"]).post("/api/knowledge/bulk", {"items": items}, format="json")
    assert reply.status_code == 200 and reply.json()["succeeded"] == 3
    assert sorted(r.json["data"]["task"] for r in receiver.received) == ["Tip 0", "Tip 1", "Tip 2"]


def test_one_user_agent_and_the_receivers_host_are_sent(carl, receiver, committed):
    subscribe(carl, receiver.url)
    with committed():
        services.knowledge_create(acting(), task="t", content="c", types=["tool"], scopes=["org:acme"])
    [request] = receiver.received
    assert request.headers["user-agent"] == "KnowHub-webhooks/1" and request.names.count("user-agent") == 1
    assert request.headers["host"] == receiver.url.split("/")[2]
    assert request.headers["content-type"] == "application/json"


def test_a_supersede_and_a_raised_conflict_are_announced(carl, receiver, committed, settings):
    from knowledge.conflicts import detect_for
    from knowledge.models import Conflict
    from knowledge.search.indexing import embed_items
    from knowledge.supersede import knowledge_supersede

    settings.KNOWHUB_CONFLICT_DETECTION, settings.KNOWHUB_LLM_MODEL = True, ""
    subscribe(carl, receiver.url, events=["knowledge.superseded", "conflict.raised"])
    old = make_knowledge(task="Liveness probe", content="The liveness probe must not check the database.", embed=False)
    new = make_knowledge(task="Liveness probe", content="Make the liveness probe check the database.", embed=False)
    embed_items(items=[old, new])
    with committed():
        detect_for(knowledge_ids=[new.id])
        knowledge_supersede(acting("user:carl"), knowledge_id=old.id, successor_id=new.id)
    received = {r.json["type"]: r.json["data"] for r in receiver.received}
    conflict = Conflict.objects.get()
    assert received["conflict.raised"] == {"conflict_id": conflict.id, "kind": "close", "first_id": conflict.first_id,
                                           "second_id": conflict.second_id, "detected_for": new.id, "explanation": ""}
    assert received["knowledge.superseded"]["knowledge_id"] == old.id
    assert received["knowledge.superseded"]["superseded_by"] == new.id


def test_a_reply_with_a_nul_byte_is_stored_with_replacement_characters_and_the_delivery_succeeds(carl, committed):
    with Receiver(answer=b"ok\x00\xff") as receiver:
        subscribe(carl, receiver.url)
        with committed():
            services.knowledge_create(acting(), task="t", content="c", types=["tool"], scopes=["org:acme"])
    assert len(receiver.received) == 1  # sent once: the outcome was stored, nothing repeats
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("succeeded", 1, 200)
    assert delivery.response_body == "ok\ufffd\ufffd"


def test_an_error_with_a_nul_character_is_stored_and_the_delivery_fails_once(carl, committed, webhook_settings,
                                                                              monkeypatch):
    from ingest.fetch import FetchRefused
    from webhooks import delivery as delivery_module

    webhook_settings.KNOWHUB_WEBHOOK_RETRY_DELAYS = []
    subscribe(carl, "http://127.0.0.1:9/hook")
    calls = []

    def refused(url, **kwargs):
        calls.append(url)
        raise FetchRefused("no answer from \x00\ud800 host")

    monkeypatch.setattr(delivery_module, "post", refused)
    with committed():
        services.knowledge_create(acting(), task="t", content="c", types=["tool"], scopes=["org:acme"])
    delivery = Delivery.objects.get()
    assert len(calls) == 1 and delivery.status == "failed" and delivery.error == "no answer from \ufffd\ufffd host"
    assert Subscription.objects.get().consecutive_failures == 1


def test_a_url_too_long_once_percent_encoded_is_refused_with_a_400_naming_url(carl, receiver):
    url = receiver.url + "/" + "é" * 700  # 700 characters become 4200 once percent-encoded
    response = carl.post("/api/webhooks", {"url": url, "events": ["knowledge.created"]}, format="json")
    assert response.status_code == 400, response.content
    assert "url" in response.json()["error"]["fields"] and "2000" in response.json()["error"]["message"]
    assert not Subscription.objects.exists()
    hook = subscribe(carl, receiver.url)
    changed = carl.patch(f"/api/webhooks/{hook['id']}", {"url": url}, format="json")
    assert changed.status_code == 400 and "url" in changed.json()["error"]["fields"]
    assert Subscription.objects.get().url == receiver.url


def test_an_event_fans_out_to_many_subscriptions_in_a_few_queries(carl, receiver, django_assert_max_num_queries,
                                                                   monkeypatch):
    from core import events
    from webhooks.services import deliveries_for_event
    from webhooks.tasks import send_delivery

    for n in range(6):
        subscribe(carl, f"{receiver.url}/{n}")
    subscribe(agent_client("curbot", ["org:acme"], can_curate=True), receiver.url)
    sent = []
    monkeypatch.setattr(send_delivery, "delay", lambda *args: sent.append(args))
    event = events.Event(type="knowledge.created", scopes=("org:acme",), data={"knowledge_id": "k"})
    with django_assert_max_num_queries(10):  # not one query (or savepoint) per subscription
        created = deliveries_for_event(event)
    assert len(created) == 7 == Delivery.objects.filter(event_id=event.id).count()
    assert deliveries_for_event(event) == []  # the same event id again: nothing new


def test_a_feedback_batch_reaches_each_subscription_with_the_reports_on_its_scopes(receiver, committed):
    acme = subscribe(agent_client("curbot", ["org:acme"], can_curate=True), receiver.url, events=["feedback.received"])
    subscribe(agent_client("otherbot", ["org:other"], can_curate=True), receiver.url, events=["feedback.received"])
    ours, theirs = make_knowledge(scopes=["org:acme"]), make_knowledge(scopes=["org:other"])
    reports = [{"knowledge_id": kid, "helpful": n % 2 == 0, "case": {"n": n}}
               for n, kid in enumerate([ours.id, theirs.id] * 10)]
    with committed():
        assert feedback.feedback_record_batch(acting("agent:a"), reports) == [True] * 20
    deliveries = Delivery.objects.filter(event_type="feedback.received")
    assert deliveries.count() == 20 == len(receiver.received)
    ours_delivered = [d.payload["data"] for d in deliveries if str(d.subscription_id) == acme["id"]]
    assert len(ours_delivered) == 10 and {d["knowledge_id"] for d in ours_delivered} == {ours.id}


def test_many_events_announced_together_fan_out_in_a_few_queries(receiver, django_assert_max_num_queries,
                                                                 monkeypatch):
    from core import events
    from webhooks.services import deliveries_for_events
    from webhooks.tasks import send_delivery

    subscribe(agent_client("curbot", ["org:acme"], can_curate=True), receiver.url, events=["feedback.received"])
    subscribe(agent_client("otherbot", ["org:other"], can_curate=True), receiver.url, events=["feedback.received"])
    monkeypatch.setattr(send_delivery, "delay", lambda *args: None)
    announced = [events.event_new("feedback.received", scopes=[("org:acme", "org:other")[n % 2]], data={"n": n})
                 for n in range(40)]
    with django_assert_max_num_queries(10):  # not one per event
        assert len(deliveries_for_events(announced)) == 40


def test_nobody_subscribed_costs_an_announcement_one_query(django_assert_num_queries):
    from core import events
    from webhooks.services import deliveries_for_events

    announced = [events.event_new("feedback.received", scopes=["org:acme"], data={"n": n}) for n in range(50)]
    with django_assert_num_queries(1):
        assert deliveries_for_events(announced) == []
