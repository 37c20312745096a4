"""In Debian's chromium: the main pages run under the Content-Security-Policy with no violation, and a
stored javascript:/data: URL is never a link (issue 12, item 4). Fails, never skips, without chromium."""

import pytest
from django.contrib.auth.models import Group

from curation.screenshots import DESKTOP, log_in
from tests.curation.demo import make_demo
from tests.factories import make_knowledge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-for-browser-tests"
STORED_URLS = ["javascript:window.x=1", "JaVaScRiPt:window.x=1", "\tjavascript:window.x=1",
               "data:text/html,<script>window.x=1</script>"]


@pytest.fixture
def watched(chromium):
    """A page that records CSP violations (console and securitypolicyviolation events) and script errors."""
    context = chromium.new_context(viewport=DESKTOP)
    context.add_init_script("""window.__violations = [];
      document.addEventListener('securitypolicyviolation',
        e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));""")
    page = context.new_page()
    page.problems = []
    page.on("console", lambda m: m.type == "error" and "Content Security Policy" in m.text and page.problems.append(m.text))
    page.on("pageerror", lambda exc: page.problems.append(str(exc)))
    page.on("dialog", lambda dialog: dialog.accept())
    yield page
    context.close()


@pytest.fixture
def admin(django_user_model):
    user = django_user_model.objects.create_superuser(username="root", email="", password=PASSWORD)
    user.groups.add(Group.objects.get(name="admin"))
    return user


def visit(page, url: str, *, ready: str | None = None):
    page.goto(url)
    page.wait_for_load_state("networkidle")
    if ready:
        page.wait_for_selector(ready)
    return page.evaluate("window.__violations")


def test_the_violation_watch_sees_an_inline_script(watched, live_server):
    watched.goto(f"{live_server.url}/login/")
    watched.evaluate("const s = document.createElement('script'); s.textContent = 'window.y = 1'; document.body.append(s)")
    watched.wait_for_timeout(200)  # wait_for_function would eval, which the policy forbids
    assert watched.evaluate("window.y") is None
    assert any("script-src" in v for v in watched.evaluate("window.__violations"))


def test_main_pages_run_under_the_policy_without_violations(watched, live_server, admin):
    demo = make_demo()
    item, secret = demo["items"][0], demo["secret"]
    base = live_server.url
    assert visit(watched, f"{base}/login/") == []
    log_in(watched, base, "root", PASSWORD)
    pages = [("/", "#ranking .empty"), ("/knowledge/", "#results li"), (f"/knowledge/{item.id}/", "#explain dl"),
             ("/review/", None), ("/resources/", None), (f"/resources/{secret.id}/", None), ("/playground/", None),
             ("/audit/", None), ("/admin/", None), ("/admin/knowledge/knowledge/", None),
             (f"/admin/knowledge/knowledge/{item.id}/change/", None), ("/admin/axes/accessattempt/", None),
             ("/api/docs/", ".swagger-ui .opblock"), ("/no-such-page/", None)]
    for path, ready in pages:
        assert visit(watched, base + path, ready=ready) == [], path

    visit(watched, f"{base}/knowledge/")  # htmx swaps work under the policy: live search, the indicator, a reveal
    watched.fill("#id_q", "invoices ledger")
    watched.wait_for_selector("#results >> text=candidate")
    visit(watched, f"{base}/resources/{secret.id}/")
    watched.click("text=Reveal (audited)")
    watched.wait_for_selector("text=DEMO-SECRET-123")
    assert watched.evaluate("window.__violations") == []
    assert watched.problems == []


def test_a_stored_javascript_url_is_text_and_clicking_it_runs_nothing(watched, live_server, admin):
    item = make_knowledge(source={"urls": ["https://docs.example.com/", *STORED_URLS]})
    log_in(watched, live_server.url, "root", PASSWORD)
    visit(watched, f"{live_server.url}/knowledge/{item.id}/")
    hrefs = watched.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
    assert [h for h in hrefs if not h.startswith(live_server.url)] == ["https://docs.example.com/"]
    unlinked = watched.locator(".unlinked")
    assert unlinked.count() == len(STORED_URLS)
    for n in range(len(STORED_URLS)):
        unlinked.nth(n).click()
    assert watched.evaluate("window.x") is None and watched.url == f"{live_server.url}/knowledge/{item.id}/"
    assert watched.problems == []
