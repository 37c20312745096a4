"""Secrets never leak: every API endpoint and admin page that shows a resource is swept for the secret.

The only ways to see a secret are the audited reveals: `GET /api/resource/{id}?reveal=true` for a
token with secret access (the current secret only), and the admin's POST-only reveal page for
superusers (current secret and earlier versions).
"""
import logging

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from resources.models import ResourceVersion, RevealEvent
from tests.knowledge.test_api_knowledge import client_for

pytestmark = pytest.mark.django_db

OLD_SECRET = "账号:old@example.com\n密码:OldPass-7f3a91"
SECRET = "账号:user@example.com\n密码:SecurePass-2c8e44"
COOKIE_SECRET = "session_id=sess-9d41be; auth_token=tok-5a7c03"
SECRET_MARKERS = ("OldPass-7f3a91", "SecurePass-2c8e44", "sess-9d41be", "tok-5a7c03", "old@example.com", "user@example.com")


def assert_no_secret(text: str, where: str) -> None:
    leaked = [marker for marker in SECRET_MARKERS if marker in text]
    assert not leaked, f"{where} shows {leaked}"


@pytest.fixture
def stored(caplog):
    """A credential saved twice (one earlier version), a cookie, knowledge linking both, a reveal."""
    caplog.set_level(logging.DEBUG)
    writer = client_for("research_agent", ["org:acme"])
    keeper = client_for("vault_agent", ["org:acme"], can_read_secrets=True)
    credential = {"id": "credentials/website_a", "title": "Staging account", "body": "Log in with it directly",
                  "content_type": "credential"}
    assert writer.post("/api/resource", {**credential, "secure_body": OLD_SECRET}, format="json").status_code == 201
    assert writer.post("/api/resource", {**credential, "secure_body": SECRET}, format="json").status_code == 201
    cookie = {"id": "cookies/website_a", "title": "Staging cookie", "secure_body": COOKIE_SECRET, "content_type": "cookie",
              "metadata": {"expires_at": "2099-01-01T00:00:00Z"}}
    assert writer.post("/api/resource", cookie, format="json").status_code == 201
    item = writer.post("/api/knowledge", {
        "task": "Log in to the staging site", "content": "Use the staging account and cookie", "types": ["tool"],
        "resource_ids": ["credentials/website_a", "cookies/website_a"], "tags": {"domain": "staging"},
    }, format="json")
    assert item.status_code == 201, item.json()
    revealed = keeper.get("/api/resource/credentials/website_a", {"reveal": "true"})
    assert revealed.json()["secure_body"] == SECRET
    return {"writer": writer, "keeper": keeper, "knowledge_id": item.json()["id"]}


def test_no_api_endpoint_shows_a_secret_without_reveal(stored, caplog):
    writer, keeper, kid = stored["writer"], stored["keeper"], stored["knowledge_id"]
    responses = {
        "search GET": writer.get("/api/knowledge/search", {"q": "staging login", "min_score": 1, "explain": "true"}),
        "search POST": writer.post("/api/knowledge/search", {"q": "staging", "min_score": 1}, format="json"),
        "list": writer.get("/api/knowledge"),
        "detail": writer.get(f"/api/knowledge/{kid}"),
        "filters": writer.get("/api/knowledge/filters"),
        "resource": writer.get("/api/resource/credentials/website_a"),
        "resource (secret token, no reveal)": keeper.get("/api/resource/credentials/website_a"),
        "cookie": keeper.get("/api/resource/cookies/website_a"),
        "reveal refused": writer.get("/api/resource/credentials/website_a", {"reveal": "true"}),
        "bad save": writer.post("/api/resource", {"id": "credentials/x", "title": "x", "content_type": "nope",
                                                  "secure_body": SECRET}, format="json"),
        "bad save of a taken id": client_for("spy", ["org:other"]).post(
            "/api/resource", {"id": "credentials/website_a", "title": "x", "secure_body": SECRET}, format="json"),
    }
    assert [r.status_code for r in responses.values()] == [200] * 8 + [403, 400, 409]
    assert any(kid == hit["id"] for hit in responses["search GET"].json()["results"])  # the sweep saw the item
    for where, response in responses.items():
        assert_no_secret(response.content.decode(), where)
    assert_no_secret(caplog.text, "the logs")


def test_no_admin_page_shows_a_secret_until_a_superuser_reveals_it(stored, client, curator):
    from agents.models import AuditEvent

    client.force_login(curator)
    version = ResourceVersion.objects.get()
    event = RevealEvent.objects.get()
    audit = AuditEvent.objects.filter(operation="resource_save").first()
    pages = [
        reverse("admin:resources_resource_changelist"),
        reverse("admin:resources_resource_change", args=["credentials/website_a"]),
        reverse("admin:resources_resource_change", args=["cookies/website_a"]),
        reverse("admin:resources_resource_history", args=["credentials/website_a"]),
        reverse("admin:resources_resource_reveal", args=["credentials/website_a"]),  # the confirmation, before POST
        reverse("admin:resources_resourceversion_changelist"),
        reverse("admin:resources_resourceversion_change", args=[version.pk]),
        reverse("admin:resources_resourceversion_reveal", args=[version.pk]),
        reverse("admin:resources_revealevent_changelist"),
        reverse("admin:resources_revealevent_change", args=[event.pk]),
        reverse("admin:knowledge_knowledge_changelist"),
        reverse("admin:knowledge_knowledge_change", args=[stored["knowledge_id"]]),
        reverse("admin:agents_auditevent_changelist"),
        reverse("admin:agents_auditevent_change", args=[audit.pk]),
        reverse("admin:resources_resource_changelist") + "?q=SecurePass",
    ]
    for page in pages:
        response = client.get(page)
        assert response.status_code == 200, page
        assert_no_secret(response.content.decode(), page)
    assert RevealEvent.objects.count() == 1  # looking is not revealing


def test_a_superuser_reveals_current_and_earlier_secrets_in_the_admin_and_each_reveal_is_audited(stored, client, curator):
    client.force_login(curator)
    version = ResourceVersion.objects.get()
    current = client.post(reverse("admin:resources_resource_reveal", args=["credentials/website_a"]),
                          HTTP_USER_AGENT="curator-browser")
    assert SECRET.splitlines()[1] in current.content.decode() and "no-store" in current["Cache-Control"]
    old = client.post(reverse("admin:resources_resourceversion_reveal", args=[version.pk]))
    assert OLD_SECRET.splitlines()[1] in old.content.decode() and SECRET.splitlines()[1] not in old.content.decode()
    events = list(RevealEvent.objects.order_by("id").values_list("principal", "resource_id", "version", "user_agent"))
    assert events[1:] == [("user:alice", "credentials/website_a", None, "curator-browser"),
                          ("user:alice", "credentials/website_a", 1, "")]


def test_only_the_admin_role_may_reveal_in_the_admin(stored, client, django_user_model):
    from django.contrib.auth.models import Group

    staff = django_user_model.objects.create_user(username="bob", password="pw", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="resources").exclude(codename="reveal_resource"))
    client.force_login(staff)
    version = ResourceVersion.objects.get()
    urls = (reverse("admin:resources_resource_reveal", args=["credentials/website_a"]),
            reverse("admin:resources_resourceversion_reveal", args=[version.pk]))
    assert client.get(reverse("admin:resources_resource_change", args=["credentials/website_a"])).status_code == 200
    for url in urls:
        response = client.post(url)
        assert response.status_code == 403
        assert_no_secret(response.content.decode(), url)
    assert RevealEvent.objects.count() == 1
    staff.groups.add(Group.objects.get(name="admin"))
    staff = django_user_model.objects.get(pk=staff.pk)  # permissions are cached per user object
    client.force_login(staff)
    assert "SecurePass-2c8e44" in client.post(urls[0]).content.decode()
    assert RevealEvent.objects.filter(principal="user:bob").count() == 1


def test_an_expired_secret_is_never_revealed_in_the_admin(stored, client, curator):
    from django.utils import timezone

    from resources.models import Resource

    Resource.objects.filter(pk="cookies/website_a").update(expires_at=timezone.now())
    client.force_login(curator)
    response = client.post(reverse("admin:resources_resource_reveal", args=["cookies/website_a"]))
    assert response.status_code == 200 and "expired" in response.content.decode()
    assert_no_secret(response.content.decode(), "expired reveal")
    assert RevealEvent.objects.count() == 1


def test_earlier_versions_cannot_be_edited_or_deleted_in_the_admin(stored, client, curator):
    client.force_login(curator)
    version = ResourceVersion.objects.get()
    assert client.post(reverse("admin:resources_resourceversion_delete", args=[version.pk]), {"post": "yes"}).status_code == 403
    assert client.post(reverse("admin:resources_resourceversion_change", args=[version.pk]), {"title": "changed"}).status_code == 403
    version.refresh_from_db()
    assert (version.title, version.secure_body) == ("Staging account", OLD_SECRET)


def test_agents_only_ever_reveal_the_current_secret(stored):
    asked_for_old = stored["keeper"].get("/api/resource/credentials/website_a", {"reveal": "true", "version": "1"})
    assert asked_for_old.status_code == 400 and list(asked_for_old.json()["error"]["fields"]) == ["version"]
    assert_no_secret(asked_for_old.content.decode(), "a reveal asking for an earlier version")
    revealed = stored["keeper"].get("/api/resource/credentials/website_a", {"reveal": "true"}).json()
    assert revealed["secure_body"] == SECRET and revealed["version"] == 2
