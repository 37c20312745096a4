"""Resources: secrets never appear in a page until an admin's audited reveal."""
from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge.models import Knowledge
from resources.models import RevealEvent
from resources.services import resource_save_version
from tests.factories import make_knowledge, make_resource
from tests.callers import acting

pytestmark = pytest.mark.django_db
SECRET = "s3cr3t-PASSWORD-do-not-show"


@pytest.fixture
def secret_resource():
    resource = make_resource("credentials/site_a", secure_body=SECRET, body="login form at /login", content_type="credential")
    resource_save_version(acting("agent:x"), resource_id=resource.id, title="site A", body="login form at /login", secure_body=SECRET + "-v2",
                          content_type="credential")
    item = make_knowledge(task="Log in to site A", resource_ids=[resource.id], embed=False)
    return resource, item


def test_no_page_shows_a_secret_before_the_reveal(admin_client_, secret_resource):
    resource, item = secret_resource
    Knowledge.objects.filter(pk=item.pk).update(helpful=1)
    urls = ["/", "/resources/", "/resources/?q=site", f"/resources/{resource.id}/", f"/knowledge/{item.id}/",
            f"/knowledge/{item.id}/edit/", "/knowledge/", "/knowledge/?q=site", "/audit/", "/review/", "/playground/"]
    for url in urls:
        response = admin_client_.get(url)
        assert response.status_code == 200, url
        assert SECRET not in response.content.decode(), url
    detail = admin_client_.get(f"/resources/{resource.id}/").content.decode()
    assert "••••" in detail and "Reveal (audited)" in detail and "login form at /login" in detail
    assert not RevealEvent.objects.exists()


def test_admin_reveal_shows_the_secret_and_is_audited(admin_client_, secret_resource):
    resource, _ = secret_resource
    response = admin_client_.post(f"/resources/{resource.id}/reveal/", HTTP_USER_AGENT="pytest-browser")
    assert response.status_code == 200 and SECRET + "-v2" in response.content.decode()
    event = RevealEvent.objects.get()
    assert (event.principal, event.resource_id, event.user_agent) == ("user:ada", resource.id, "pytest-browser")
    assert "user:ada" in admin_client_.get("/audit/").content.decode()


def test_viewers_and_curators_see_no_reveal_button(curator_client, secret_resource):
    resource, _ = secret_resource
    body = curator_client.get(f"/resources/{resource.id}/").content.decode()
    assert "Reveal (audited)" not in body and "Only admins can reveal secrets" in body and SECRET not in body


def test_an_expired_secret_is_not_revealed(admin_client_):
    make_resource("cookies/site", secure_body=SECRET, expires_at=timezone.now() - timedelta(hours=1))
    response = admin_client_.post("/resources/cookies/site/reveal/")
    assert response.status_code == 410 and "expired" in response.content.decode()
    assert SECRET not in response.content.decode() and not RevealEvent.objects.exists()


def test_missing_resource_is_404(admin_client_):
    assert admin_client_.get("/resources/nope/").status_code == 404
    assert admin_client_.post("/resources/nope/reveal/").status_code == 404


def test_an_expired_secret_offers_no_reveal_button(admin_client_):
    expires = timezone.now() - timedelta(hours=1)
    make_resource("cookies/old", secure_body=SECRET, content_type="cookie", expires_at=expires)
    body = admin_client_.get("/resources/cookies/old/").content.decode()
    assert "Reveal (audited)" not in body and SECRET not in body
    assert f"This cookie expired at {expires:%Y-%m-%d %H:%M} UTC" in body.split('<div id="secret">')[1]


def test_audit_targets_link_to_their_pages(admin_client_, secret_resource):
    from agents.audit import audit_record

    resource, item = secret_resource
    audit_record(principal="agent:x", operation="knowledge_save", target=item.id)
    audit_record(principal="agent:x", operation="resource_save", target=resource.id)
    audit_record(principal="agent:x", operation="agent_token_create", target="token-7")
    body = admin_client_.get("/audit/").content.decode()
    assert f'<td><a href="/knowledge/{item.id}/">{item.id}</a></td>' in body
    assert f'<td><a href="/resources/{resource.id}/">{resource.id}</a></td>' in body
    assert "<td>token-7</td>" in body  # neither: plain text


def test_a_resource_whose_id_ends_in_reveal_has_a_page_and_a_reveal_of_its_own(admin_client_):
    make_resource("cred/x", secure_body=SECRET + "-x")
    make_resource("cred/x/reveal", secure_body=SECRET + "-reveal", body="the one ending in reveal")
    listed = admin_client_.get("/resources/?q=cred/x").content.decode()
    assert 'href="/resources/cred/x/reveal/"' in listed
    page = admin_client_.get("/resources/cred/x/reveal/")
    assert page.status_code == 200 and "the one ending in reveal" in page.content.decode()
    assert 'hx-post="/resources/cred/x/reveal/"' in page.content.decode()  # its reveal button: its own address
    revealed = admin_client_.post("/resources/cred/x/reveal/").content.decode()
    assert SECRET + "-reveal" in revealed and SECRET + "-x" not in revealed
    assert SECRET + "-x" in admin_client_.post("/resources/cred/x/").content.decode()
    assert list(RevealEvent.objects.order_by("id").values_list("resource_id", flat=True)) == ["cred/x/reveal", "cred/x"]


def test_the_old_reveal_link_still_reveals_when_no_resource_is_named_so(admin_client_, secret_resource):
    resource, _ = secret_resource
    assert admin_client_.get(f"/resources/{resource.id}/reveal/").status_code == 404  # a page: of no resource
    assert SECRET in admin_client_.post(f"/resources/{resource.id}/reveal/").content.decode()
