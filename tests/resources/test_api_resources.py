"""POST /api/resource and GET /api/resource/{id} with the seed's scenarios."""
import pytest

from tests.knowledge.test_api_knowledge import client_for

pytestmark = pytest.mark.django_db

CREDENTIAL = {
    "id": "credentials/website_a",
    "title": "某网站测试账号",
    "body": "使用方法:直接登录即可,每天限额 100 次",
    "secure_body": "账号:user@example.com\n密码:SecurePass123",
    "content_type": "credential",
    "metadata": {"acquired_at": "2026-03-06T10:00:00Z"},
}
COOKIE = {
    "id": "cookies/website_a",
    "title": "某网站 Cookie",
    "body": "适用于:已登录状态的 API 调用",
    "secure_body": "session_id=abc123; auth_token=xyz789",
    "content_type": "cookie",
    "metadata": {"acquired_at": "2026-03-06T10:00:00Z", "expires_at": "2026-03-07T10:00:00Z"},
}
CODE = {
    "id": "code/selenium/undetected_login",
    "title": "Selenium 绕过检测登录代码",
    "body": "import undetected_chromedriver as uc\n\ndriver = uc.Chrome()...",
    "content_type": "code",
    "metadata": {"language": "python"},
}


@pytest.fixture
def writer():
    return client_for("research_agent", ["org:acme"])


@pytest.fixture
def keeper():
    return client_for("vault_agent", ["org:acme"], can_read_secrets=True)


def test_seed_resources_save_verbatim_and_never_show_the_secret_by_default(writer):
    for body in (CREDENTIAL, COOKIE, CODE):
        response = writer.post("/api/resource", body, format="json")
        assert response.status_code == 201, response.json()
        assert "SecurePass123" not in response.content.decode() and "abc123" not in response.content.decode()
    got = writer.get("/api/resource/credentials/website_a").json()
    assert got["title"] == CREDENTIAL["title"] and got["has_secret"] is True and "secure_body" not in got
    assert writer.get("/api/resource/code/selenium/undetected_login").json()["body"] == CODE["body"]


def test_knowledge_can_reference_saved_resources(writer):
    writer.post("/api/resource", CODE, format="json")
    body = {"task": "使用 Selenium 登录某网站并绕过反爬检测", "content": "使用 undetected_chromedriver", "types": ["tool", "strategy"],
            "resource_ids": ["code/selenium/undetected_login"]}
    item = writer.post("/api/knowledge", body, format="json").json()
    assert item["resource_ids"] == ["code/selenium/undetected_login"]


def test_reveal_needs_secret_access(writer, keeper):
    writer.post("/api/resource", CREDENTIAL, format="json")
    assert writer.get("/api/resource/credentials/website_a", {"reveal": "true"}).status_code == 403
    revealed = keeper.get("/api/resource/credentials/website_a", {"reveal": "true"}).json()
    assert revealed["secure_body"] == CREDENTIAL["secure_body"]


def test_an_expired_cookie_is_never_revealed(writer, keeper):
    writer.post("/api/resource", COOKIE, format="json")  # expired 2026-03-07, read from metadata
    response = keeper.get("/api/resource/cookies/website_a", {"reveal": "true"})
    assert response.status_code == 410
    assert "2026-03-07T10:00:00" in response.json()["error"]["message"]


def test_other_orgs_get_404(writer):
    writer.post("/api/resource", CREDENTIAL, format="json")
    outsider = client_for("spy", ["org:other"], can_read_secrets=True)
    assert outsider.get("/api/resource/credentials/website_a", {"reveal": "true"}).status_code == 404


@pytest.mark.parametrize(("change", "field"), [({"id": "../etc/passwd"}, "id"), ({"content_type": "binary"}, "content_type"),
                                               ({"scopes": ["org:other"]}, None), ({"title": ""}, "title"),
                                               ({"metadata": {"expires_at": "soon"}}, "metadata")])
def test_bad_resources_are_refused(writer, change, field):
    response = writer.post("/api/resource", {**CREDENTIAL, **change}, format="json")
    if field is None:
        assert response.status_code == 403
    else:
        assert response.status_code == 400 and field in response.json()["error"]["fields"]


def test_saving_an_existing_id_again_makes_a_version_and_keeps_the_old_secret_encrypted(writer, keeper):
    from django.db import connection

    from resources.models import ResourceVersion

    writer.post("/api/resource", CREDENTIAL, format="json")
    again = writer.post("/api/resource", {**CREDENTIAL, "secure_body": "账号:new@example.com\n密码:NewPass456"}, format="json")
    assert again.status_code == 201 and again.json()["version"] == 2
    assert keeper.get("/api/resource/credentials/website_a", {"reveal": "1"}).json()["secure_body"].endswith("NewPass456")
    old = ResourceVersion.objects.get()
    assert (old.number, old.secure_body, old.replaced_by) == (1, CREDENTIAL["secure_body"], "agent:research_agent")
    with connection.cursor() as cursor:
        cursor.execute("SELECT secure_body FROM resources_resourceversion")
        assert "SecurePass123" not in cursor.fetchone()[0]


def test_another_org_cannot_overwrite_or_probe_a_resource_id(writer, keeper):
    writer.post("/api/resource", CREDENTIAL, format="json")
    outsider = client_for("spy", ["org:other"])
    response = outsider.post("/api/resource", {**CREDENTIAL, "secure_body": "pwned"}, format="json")
    assert response.status_code == 409
    reader = client_for("reader", ["org:acme"], writable_scopes=[])
    assert reader.post("/api/resource", {**CREDENTIAL, "secure_body": "pwned"}, format="json").status_code == 403
    assert keeper.get("/api/resource/credentials/website_a", {"reveal": "1"}).json()["secure_body"] == CREDENTIAL["secure_body"]


def test_every_reveal_is_audited_and_refusals_are_not(writer, keeper, client, curator):
    from resources.models import RevealEvent

    writer.post("/api/resource", CREDENTIAL, format="json")
    writer.get("/api/resource/credentials/website_a", {"reveal": "true"})  # refused: no secret access
    keeper.get("/api/resource/credentials/website_a")  # not a reveal
    keeper.get("/api/resource/credentials/website_a", {"reveal": "true"}, HTTP_USER_AGENT="vault-bot/1.0")
    event = RevealEvent.objects.get()
    assert (event.principal, event.resource_id, event.remote_addr, event.user_agent) == (
        "agent:vault_agent", "credentials/website_a", "127.0.0.1", "vault-bot/1.0")
    client.force_login(curator)
    assert client.get("/admin/resources/revealevent/").status_code == 200
    assert client.get(f"/admin/resources/revealevent/{event.pk}/change/").status_code == 200
    assert client.post(f"/admin/resources/revealevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert RevealEvent.objects.count() == 1


def test_knowledge_may_only_link_resources_its_readers_can_read(writer):
    from tests.factories import make_resource

    make_resource("credentials/private", scopes=["org:other"])
    make_resource("code/narrow", scopes=["org:acme"])
    body = {"task": "t", "content": "c", "types": ["tool"]}
    unreadable = writer.post("/api/knowledge", {**body, "resource_ids": ["credentials/private"]}, format="json")
    assert unreadable.status_code == 400 and "credentials/private" in unreadable.json()["error"]["message"]
    assert "unknown or unreadable" in unreadable.json()["error"]["message"]
    wide = client_for("wide_agent", ["org:acme", "org:beta"])
    widening = wide.post("/api/knowledge", {**body, "scopes": ["org:acme", "org:beta"], "resource_ids": ["code/narrow"]}, format="json")
    assert widening.status_code == 400 and "code/narrow" in widening.json()["error"]["fields"]["resource_ids"][0]
    assert writer.post("/api/knowledge", {**body, "resource_ids": ["code/narrow"]}, format="json").status_code == 201


def test_the_expiry_check_flags_expired_resources_and_lists_what_depends_on_them(writer):
    from resources.selectors import resources_needing_refresh
    from resources.tasks import mark_expired_resources

    writer.post("/api/resource", COOKIE, format="json")  # expired in March
    writer.post("/api/resource", {**CREDENTIAL, "expires_at": "2099-01-01T00:00:00Z"}, format="json")
    item = writer.post("/api/knowledge", {"task": "call the API", "content": "with the cookie", "types": ["tool"],
                                          "resource_ids": ["cookies/website_a"]}, format="json").json()
    assert mark_expired_resources() == ["cookies/website_a"]
    assert mark_expired_resources() == []  # flagged once
    assert [(r["id"], r["knowledge_ids"]) for r in resources_needing_refresh()] == [("cookies/website_a", [item["id"]])]


@pytest.mark.django_db(transaction=True)
def test_first_saves_of_one_id_at_once_each_land_as_a_version_not_a_409():
    import threading

    from django.db import connections

    from agents import operations
    from resources.models import Resource, ResourceVersion
    from tests.callers import acting

    start, outcomes = threading.Barrier(8), []

    def save(n):
        try:
            start.wait()
            operations.call("resource_save", acting(f"agent:a{n}"), data={
                "id": "code/deploy", "title": f"deploy {n}", "body": f"v{n}", "scopes": ["org:acme"]})
            outcomes.append("saved")
        except Exception as exc:  # noqa: BLE001 - collected: the assertion names it
            outcomes.append(repr(exc))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=save, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert outcomes == ["saved"] * 8
    assert Resource.objects.count() == 1 and ResourceVersion.objects.count() == 7
    assert sorted(ResourceVersion.objects.values_list("number", flat=True)) == list(range(1, 8))


def test_a_revealed_secret_is_sent_never_to_be_stored_to_a_token_and_a_session(writer, keeper, django_user_model):
    from tests.callers import person_in, session_client

    writer.post("/api/resource", CREDENTIAL, format="json")
    admin = session_client(person_in(django_user_model, "admin", "ada"))
    for client in (keeper, admin):
        revealed = client.get("/api/resource/credentials/website_a", {"reveal": "true"})
        assert revealed.json()["secure_body"] == CREDENTIAL["secure_body"]
        assert "no-store" in revealed["Cache-Control"] and "private" in revealed["Cache-Control"]
        assert {"Authorization", "Cookie"} <= {v.strip() for v in revealed["Vary"].split(",")}
    plain = keeper.get("/api/resource/credentials/website_a")
    assert "secure_body" not in plain.json() and "no-store" not in plain.get("Cache-Control", "")
