import pytest

from tests.factories import make_knowledge, make_resource

pytestmark = pytest.mark.django_db


def test_anonymous_user_is_sent_to_admin_login(client):
    response = client.get("/admin/knowledge/knowledge/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_curator_sees_knowledge_with_quality_and_can_filter_by_type(client, curator):
    make_knowledge(task="Selenium login bypass", types=["tool"], score=4, helpful=3, harmful=1)
    make_knowledge(task="User prefers tabs", types=["user_profile"])
    client.force_login(curator)

    listing = client.get("/admin/knowledge/knowledge/").content.decode()
    assert "Selenium login bypass" in listing and "User prefers tabs" in listing

    filtered = client.get("/admin/knowledge/knowledge/?type=user_profile").content.decode()
    assert "User prefers tabs" in filtered and "Selenium login bypass" not in filtered

    searched = client.get("/admin/knowledge/knowledge/?q=selenium").content.decode()
    assert "Selenium login bypass" in searched and "User prefers tabs" not in searched

    by_quality = client.get("/admin/knowledge/knowledge/?o=7").status_code
    assert by_quality == 200


def test_curator_opens_an_item_with_its_resources(client, curator):
    make_resource("code/selenium/login", content_type="code")
    item = make_knowledge(resource_ids=["code/selenium/login"])
    client.force_login(curator)
    page = client.get(f"/admin/knowledge/knowledge/{item.pk}/change/")
    assert page.status_code == 200
    assert "code/selenium/login" in page.content.decode()


def test_admin_never_shows_a_secret(client, curator):
    make_resource("credentials/site", content_type="credential", secure_body="hunter2-very-secret")
    client.force_login(curator)
    for url in ["/admin/resources/resource/", "/admin/resources/resource/credentials/site/change/"]:
        page = client.get(url)
        assert page.status_code == 200
        assert "hunter2-very-secret" not in page.content.decode()


def test_ensure_curator_prints_a_password_that_logs_in_to_the_admin(client):
    import io
    import re

    from django.core.management import call_command

    out = io.StringIO()
    call_command("ensure_curator", stdout=out)
    password = re.search(r"with password: (\S+)", out.getvalue()).group(1)
    login = client.get("/admin/login/")
    response = client.post(
        "/admin/login/?next=/admin/",
        {"username": "curator", "password": password, "csrfmiddlewaretoken": login.cookies["csrftoken"].value},
        follow=True,
    )
    page = response.content.decode()
    assert "Knowledge" in page and "Resources" in page
    again = io.StringIO()
    call_command("ensure_curator", stdout=again)
    assert "exists" in again.getvalue() and password not in again.getvalue()


def test_two_curators_never_get_the_same_generated_password(django_user_model):
    import io
    import re

    from django.core.management import call_command

    first, second = io.StringIO(), io.StringIO()
    call_command("ensure_curator", "--username", "one", stdout=first)
    call_command("ensure_curator", "--username", "two", stdout=second)
    grab = lambda out: re.search(r"with password: (\S+)", out.getvalue()).group(1)  # noqa: E731
    assert grab(first) != grab(second)


def test_a_curator_creates_an_agent_token_in_the_admin_and_it_works(client, curator):
    from rest_framework.test import APIClient

    from agents.models import AgentToken

    client.force_login(curator)
    response = client.post("/admin/agents/agenttoken/add/", {
        "agent_id": "research_agent", "name": "laptop", "readable_scopes": "org:acme", "writable_scopes": "org:acme",
        "static_filters": "", "is_active": "on",
    }, follow=True)
    page = response.content.decode()
    key = page.split("Token for agent:research_agent: ")[1].split(" ")[0]
    token = AgentToken.objects.get()
    assert token.key_prefix == key[:10] and key not in str(AgentToken.objects.values_list())
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert api.get("/api/knowledge/search", {"q": "x"}).status_code == 200


def test_admin_refuses_a_token_with_a_bad_static_filter(client, curator):
    from agents.models import AgentToken

    client.force_login(curator)
    response = client.post("/admin/agents/agenttoken/add/", {
        "agent_id": "a", "readable_scopes": "org:acme", "writable_scopes": "", "is_active": "on",
        "static_filters": '{"op": "EQ", "key": "colour", "value": "red"}',
    })
    assert response.status_code == 200 and "unknown filter key" in response.content.decode().lower()
    assert not AgentToken.objects.exists()
