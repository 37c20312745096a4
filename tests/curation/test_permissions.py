"""Roles: anonymous users log in first, viewers read, curators change, admins reveal and audit; CSRF holds."""
import re

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import Client

from knowledge.models import Knowledge
from resources.models import RevealEvent
from tests.factories import make_knowledge, make_resource

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/", "/ranking/", "/knowledge/", "/review/", "/resources/", "/playground/", "/audit/",
                                 "/knowledge/knowledge-20260305-a1b2/"])
def test_anonymous_user_is_sent_to_the_login_page(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(f"/login/?next={url}")


def test_login_page_logs_a_user_in_and_back_to_where_they_were(client, viewer):
    page = client.get("/login/?next=/knowledge/")
    assert page.status_code == 200 and b'name="password"' in page.content
    response = client.post("/login/", {"username": "vera", "password": "pw-for-tests", "next": "/knowledge/"})
    assert response.status_code == 302 and response["Location"] == "/knowledge/"
    bad = Client().post("/login/", {"username": "vera", "password": "nope"})
    assert bad.status_code == 200 and b"didn't match" in bad.content


def test_the_roles_are_groups_with_growing_permissions():
    perms = {g.name: {f"{p.content_type.app_label}.{p.codename}" for p in g.permissions.all()} for g in Group.objects.all()}
    assert "knowledge.view_knowledge" in perms["viewer"] and "knowledge.change_knowledge" not in perms["viewer"]
    assert perms["viewer"] < perms["curator"] < perms["admin"]
    assert "resources.reveal_resource" in perms["admin"] and "resources.reveal_resource" not in perms["curator"]


def test_viewer_cannot_change_anything(viewer_client):
    item = make_knowledge()
    make_resource("credentials/site", secure_body="hunter2")
    posts = [f"/knowledge/{item.id}/edit/", f"/knowledge/{item.id}/feedback/", f"/knowledge/{item.id}/score/",
             f"/knowledge/{item.id}/restore/1/", f"/knowledge/{item.id}/evolve/", f"/knowledge/{item.id}/unmerge/",
             "/review/find/", "/review/approve/", "/review/reject/", "/resources/credentials/site/reveal/"]
    for url in posts:
        assert viewer_client.post(url, {"kind": "helpful", "score": 5, "task": "x", "content": "y"}).status_code == 403, url
    assert viewer_client.get(f"/knowledge/{item.id}/edit/").status_code == 403
    item.refresh_from_db()
    assert (item.helpful, item.score, item.versions.count()) == (0, 3, 0)
    page = viewer_client.get(f"/knowledge/{item.id}/").content.decode()
    assert "Helpful</button>" not in page and ">Edit<" not in page  # no buttons that would only fail


def test_curator_cannot_reveal_secrets_or_read_the_audit(curator_client):
    make_resource("credentials/site", secure_body="hunter2")
    assert curator_client.post("/resources/credentials/site/reveal/").status_code == 403
    assert curator_client.get("/audit/").status_code == 403
    assert not RevealEvent.objects.exists()


def test_the_superuser_from_make_run_can_do_everything(client, monkeypatch):
    monkeypatch.setenv("KNOWHUB_CURATOR_PASSWORD", "pw-for-tests")
    call_command("ensure_curator", username="curator")
    assert client.post("/login/", {"username": "curator", "password": "pw-for-tests"}).status_code == 302  # through the login throttle
    make_resource("credentials/site", secure_body="hunter2")
    assert client.get("/audit/").status_code == 200
    assert b"hunter2" in client.post("/resources/credentials/site/reveal/").content


def test_csrf_is_enforced_on_every_change(curator_user):
    item = make_knowledge()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(curator_user)
    refused = browser.post(f"/knowledge/{item.id}/feedback/", {"kind": "helpful"})
    assert refused.status_code == 403
    assert Knowledge.objects.get(pk=item.id).helpful == 0

    page = browser.get(f"/knowledge/{item.id}/").content.decode()
    token = re.search(r'"X-CSRFToken": "([^"]+)"', page).group(1)  # what htmx sends with every request
    accepted = browser.post(f"/knowledge/{item.id}/feedback/", {"kind": "helpful"}, HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 200
    assert Knowledge.objects.get(pk=item.id).helpful == 1


def test_logout_needs_a_post_and_ends_the_session(curator_client):
    assert curator_client.post("/logout/").status_code == 302
    assert curator_client.get("/").status_code == 302
