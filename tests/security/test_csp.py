"""Every page carries a strict Content-Security-Policy, and no template needs inline script or style (issue 12, item 4)."""
import re

import pytest

from tests.conftest import REPO_ROOT
from tests.factories import make_knowledge, make_resource

pytestmark = pytest.mark.django_db

STRICT = {
    "default-src": "'self'", "script-src": "'self'", "style-src": "'self'", "object-src": "'none'",
    "base-uri": "'self'", "frame-ancestors": "'none'", "form-action": "'self'",
}


def policy(response) -> dict[str, str]:
    header = response["Content-Security-Policy"]
    return dict((part.strip().split(" ", 1) + [""])[:2] for part in header.split(";") if part.strip())


def assert_strict(response):
    directives = policy(response)
    assert {name: directives.get(name) for name in STRICT} == STRICT
    assert "unsafe-inline" not in response["Content-Security-Policy"]
    assert "unsafe-eval" not in response["Content-Security-Policy"]


@pytest.mark.parametrize("url, status", [
    ("/login/", 200), ("/admin/login/", 200), ("/api/docs/", 200), ("/api/docs/?script", 200),
    ("/no-such-page/", 404), ("/", 302),
])
def test_anonymous_pages_and_errors_carry_the_strict_policy(client, url, status):
    response = client.get(url)
    assert response.status_code == status
    assert_strict(response)


def test_curation_and_admin_pages_carry_the_strict_policy(admin_client_, admin_user):
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    item = make_knowledge()
    make_resource("code/login")
    for url in ["/", "/ranking/", "/knowledge/", f"/knowledge/{item.id}/", "/review/", "/resources/", "/resources/code/login/",
                "/playground/", "/audit/", "/admin/", "/admin/knowledge/knowledge/"]:
        response = admin_client_.get(url)
        assert response.status_code == 200, url
        assert_strict(response)


def test_a_failed_csrf_check_gets_our_error_page_under_the_policy(viewer):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(viewer)
    response = browser.post("/logout/")
    assert response.status_code == 403 and "Form expired" in response.content.decode()
    assert_strict(response)


def test_swagger_docs_load_their_init_script_from_a_url_not_inline(client):
    page = client.get("/api/docs/").content.decode()
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page, re.S)
    assert scripts and all("src=" in attrs and not body.strip() for attrs, body in scripts)
    assert "<style" not in page
    script = client.get("/api/docs/?script")
    assert script["Content-Type"].startswith("application/javascript") and "SwaggerUIBundle" in script.content.decode()


INLINE = [
    (re.compile(r"\sstyle\s*="), "a style= attribute"),
    (re.compile(r"<style[\s>]"), "a <style> element"),
    (re.compile(r"<script(?![^>]*\ssrc=)[^>]*>"), "an inline <script>"),
    (re.compile(r"\son[a-z]+\s*=", re.I), "an on…= event handler"),
    (re.compile(r"\shx-on[:-]"), "an hx-on handler (needs eval)"),
    (re.compile(r"href=[\"']\s*javascript:", re.I), "a javascript: link"),
]


@pytest.mark.parametrize("template", sorted(p.relative_to(REPO_ROOT) for p in (REPO_ROOT / "templates").rglob("*.html")), ids=str)
def test_no_template_needs_inline_script_or_style(template):
    text = (REPO_ROOT / template).read_text()
    found = [what for pattern, what in INLINE if pattern.search(text)]
    assert not found, f"{template} has {', '.join(found)}: the Content-Security-Policy blocks it"


def test_htmx_injects_no_indicator_style_and_evaluates_no_code(viewer_client):
    page = viewer_client.get("/").content.decode()
    config = re.search(r'<meta name="htmx-config" content=\'([^\']+)\'', page).group(1)
    assert '"includeIndicatorStyles": false' in config and '"allowEval": false' in config


def test_an_admins_reveal_is_never_cached(admin_client_):
    make_resource("credentials/site", secure_body="hunter2")
    response = admin_client_.post("/resources/credentials/site/reveal/")
    assert b"hunter2" in response.content
    assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]
