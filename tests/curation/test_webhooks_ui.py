"""The Webhooks page: curators subscribe, see deliveries, re-send, pause, resume and delete; viewers may not."""
import pytest

from knowledge import services
from tests.callers import acting
from tests.webhooks.conftest import committed, inline_sends, receiver, webhook_settings  # noqa: F401 - fixtures
from tests.webhooks.receiver import Receiver, signature_valid
from webhooks.models import Delivery, Subscription

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("inline_sends")]

HX = {"HTTP_HX_REQUEST": "true"}


def test_the_page_starts_empty_and_a_subscription_shows_its_secret_once(curator_client):
    page = curator_client.get("/webhooks/").content.decode()
    assert 'id="no-webhooks"' in page and 'href="/webhooks/"' in page  # the nav link
    with Receiver() as receiver:
        response = curator_client.post("/webhooks/subscribe/", {
            "url": receiver.url, "events": ["knowledge.created", "job.finished"], "scopes": "org:acme"}, **HX)
    html = response.content.decode()
    sub = Subscription.objects.get()
    assert response.status_code == 200 and sub.secret in html and 'id="subscriptions" hx-swap-oob="true"' in html
    assert sub.event_types == ["knowledge.created", "job.finished"] and sub.scopes == ["org:acme"]
    assert sub.created_by == "user:carl"
    page = curator_client.get("/webhooks/").content.decode()
    assert receiver.url in page and sub.secret not in page and "No deliveries yet" in page
    shown = curator_client.post(f"/webhooks/{sub.id}/secret/", **HX).content.decode()
    assert sub.secret in shown


def test_a_private_url_is_refused_in_place_naming_the_url(curator_client, webhook_settings):
    webhook_settings.KNOWHUB_WEBHOOK_ALLOW = []
    response = curator_client.post("/webhooks/subscribe/", {"url": "http://127.0.0.1:8000/hook",
                                                            "events": ["knowledge.created"]}, **HX)
    assert response.status_code == 422
    assert 'id="subscribe-url-errors"' in response.content.decode() and "loopback" in response.content.decode()
    assert not Subscription.objects.exists()


def test_deliveries_are_listed_with_status_and_code_and_re_send_makes_a_new_attempt(curator_client, committed,
                                                                                      webhook_settings):
    webhook_settings.KNOWHUB_WEBHOOK_RETRY_DELAYS = []
    with Receiver(statuses=[500, 204]) as receiver:
        curator_client.post("/webhooks/subscribe/", {"url": receiver.url, "events": ["knowledge.created"]}, **HX)
        sub = Subscription.objects.get()
        with committed():
            services.knowledge_create(acting(), task="Rotate keys", content="c", types=["tool"], scopes=["org:acme"])
        delivery = Delivery.objects.get()
        page = curator_client.get("/webhooks/").content.decode()
        assert f'id="delivery-{delivery.id}"' in page and "badge failed" in page and ">500<" in page.replace("<div", "<")
        with committed():
            card = curator_client.post(f"/webhooks/{sub.id}/deliveries/{delivery.id}/resend/", **HX).content.decode()
        assert len(receiver.received) == 2 and signature_valid(sub.secret, receiver.received[1].headers,
                                                               receiver.received[1].body)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("succeeded", 2, 204)
    assert "Re-sent" in card and f'id="webhook-{sub.id}"' in card


def test_pause_shows_the_reason_resume_clears_it_and_delete_removes_it(curator_client, receiver):
    curator_client.post("/webhooks/subscribe/", {"url": receiver.url, "events": ["knowledge.created"]}, **HX)
    sub = Subscription.objects.get()
    paused = curator_client.post(f"/webhooks/{sub.id}/pause/", **HX).content.decode()
    assert "badge paused" in paused and "paused by user:carl" in paused and "Resume" in paused
    resumed = curator_client.post(f"/webhooks/{sub.id}/resume/", **HX).content.decode()
    assert "badge active" in resumed and "webhook-paused-reason" not in resumed
    assert "deleted" in curator_client.post(f"/webhooks/{sub.id}/delete/", **HX).content.decode()
    assert not Subscription.objects.exists()


def test_a_viewer_gets_403_and_no_webhooks_link(viewer_client):
    assert viewer_client.get("/webhooks/").status_code == 403
    assert 'href="/webhooks/"' not in viewer_client.get("/").content.decode()


def test_a_url_too_long_once_percent_encoded_is_refused_in_the_form(curator_client, receiver):
    response = curator_client.post("/webhooks/subscribe/", {"url": receiver.url + "/" + "é" * 700,
                                                            "events": ["knowledge.created"]}, **HX)
    html = response.content.decode()
    assert response.status_code == 422 and 'id="subscribe-url-errors"' in html and "percent-encoded" in html
    assert not Subscription.objects.exists()


def test_the_page_loads_every_subscription_s_latest_deliveries_in_one_query(curator_client, receiver, committed,
                                                                            django_assert_max_num_queries):
    for n in range(4):
        curator_client.post("/webhooks/subscribe/", {"url": f"{receiver.url}/{n}", "events": ["knowledge.created"]},
                            **HX)
    with committed():
        for n in range(12):
            services.knowledge_create(acting(), task=f"t{n}", content="c", types=["tool"], scopes=["org:acme"])
    assert Delivery.objects.count() == 48
    with django_assert_max_num_queries(12) as queries:
        page = curator_client.get("/webhooks/").content.decode()
    assert sum('FROM "webhooks_delivery"' in q["sql"] for q in queries.captured_queries) == 1
    for sub in Subscription.objects.all():
        shown = list(sub.deliveries.all()[:10])
        assert all(f'id="delivery-{d.id}"' in page for d in shown)
        assert page.index(f'id="delivery-{shown[0].id}"') < page.index(f'id="delivery-{shown[-1].id}"')
    assert page.count('id="delivery-') == 40


def test_a_secret_shown_is_never_kept_in_a_cache(curator_client):
    """The new subscription's secret and "Show secret" answer with no-store, as a resource's reveal does."""
    with Receiver() as receiver:
        created = curator_client.post("/webhooks/subscribe/", {"url": receiver.url, "events": ["knowledge.created"]},
                                      **HX)
    sub = Subscription.objects.get()
    assert created.status_code == 200 and sub.secret in created.content.decode()
    assert "no-store" in created["Cache-Control"] and "private" in created["Cache-Control"]
    shown = curator_client.post(f"/webhooks/{sub.id}/secret/", **HX)
    assert shown.status_code == 200 and sub.secret in shown.content.decode()
    assert "no-store" in shown["Cache-Control"] and "private" in shown["Cache-Control"]
