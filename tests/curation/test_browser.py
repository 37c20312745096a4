"""End to end in Debian's chromium (Playwright): log in, search, filter, rate, edit, reject a merge.

These fail, never skip, when chromium is missing: `.ci/run` installs it.
"""
import os
from pathlib import Path

import pytest
from django.contrib.auth.models import Group

from curation.screenshots import DESKTOP, LANGUAGES, PHONE, capture, log_in, use_language
from knowledge.models import Knowledge, SlimRejection
from tests.conftest import REPO_ROOT
from tests.curation.conftest import checked_page
from tests.curation.demo import ITEMS, make_demo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-for-browser-tests"


@pytest.fixture
def page(chromium):
    yield from checked_page(chromium, DESKTOP)


@pytest.fixture
def demo(django_user_model):
    user = django_user_model.objects.create_user(username="carl", password=PASSWORD)
    user.groups.add(Group.objects.get(name="curator"))
    return make_demo()


def test_log_in_search_and_filter(page, live_server, demo):
    page.goto(f"{live_server.url}/knowledge/")
    assert "/login/" in page.url
    page.fill("#id_username", "carl")
    page.fill("#id_password", PASSWORD)
    page.click("#main button[type=submit]")
    page.wait_for_url(f"{live_server.url}/knowledge/")
    assert page.locator("#results li").count() == len(ITEMS)

    page.evaluate("window.notReloaded = true")
    page.fill("#id_q", "invoices ledger")  # live: no submit, htmx fires after the debounce
    page.wait_for_function("document.querySelector('#results').innerText.includes('candidate')")
    assert page.locator("#results li").first.inner_text().startswith("Reconcile invoices")
    # the state, in the URL: the default order, which is relevance once there is a query ("Relevance" is not
    # offered before one: the default shows as "Newest" and follows the query)
    assert page.url.endswith("/knowledge/?q=invoices+ledger&status=active")

    page.fill("#id_q", "")
    page.wait_for_function("!document.querySelector('#results').innerText.includes('candidate')")
    page.check("input[name=types][value=user_profile]")
    page.wait_for_function("document.querySelectorAll('#results li').length === 1")
    assert "User prefers tabs" in page.inner_text("#results") and "types=user_profile" in page.url
    assert page.evaluate("window.notReloaded") is True  # only the results were swapped

    page.goto(page.url)  # a bookmarked URL shows the same view
    assert page.is_checked("input[name=types][value=user_profile]") and page.locator("#results li").count() == 1


def test_rate_an_item_and_edit_it(page, live_server, demo):
    item = demo["items"][5]  # no feedback yet
    log_in(page, live_server.url, "carl", PASSWORD)
    page.goto(f"{live_server.url}/knowledge/{item.id}/")
    page.evaluate("window.notReloaded = true")
    assert page.inner_text("#helpful-count") == "0"
    page.fill("#fb-note", "cookies worked")
    page.click("#feedback button[value=helpful]")
    page.wait_for_function("document.querySelector('#helpful-count').innerText === '1'")
    assert "cookies worked" in page.inner_text("#feedback")
    page.select_option("#score-select", "5")
    page.click("text=Set score")
    page.wait_for_function("document.querySelector('#score-value').innerText === '5'")
    assert page.evaluate("window.notReloaded") is True
    assert Knowledge.objects.get(pk=item.pk).helpful == 1

    page.click("#content button:has-text('Edit')")
    page.fill("textarea[name=content]", "")
    page.click("text=Save as a new version")
    page.wait_for_selector("#content-errors")  # the error, in place
    page.fill("textarea[name=content]", "Reuse the cookies; rotate proxies every 50 requests.")
    page.fill("input[name=reason]", "shorter")
    page.click("text=Save as a new version")
    page.wait_for_selector("#item-content")
    assert page.inner_text("#item-content") == "Reuse the cookies; rotate proxies every 50 requests."
    assert "v1" in page.inner_text("#versions") and "shorter" in page.inner_text("#versions")
    page.click("#versions button:has-text('Show diff')")
    page.wait_for_selector("#diff div.added")
    assert "Reuse the cookies; rotate proxies every 50 requests." in page.inner_text("#diff div.added")


def test_reject_a_merge_proposal(page, live_server, demo):
    log_in(page, live_server.url, "carl", PASSWORD)
    page.goto(f"{live_server.url}/review/")
    assert page.locator(".proposal").count() == 1
    page.click(".proposal button:has-text('Reject')")
    page.wait_for_selector("text=will not be proposed together again")
    assert SlimRejection.objects.count() == 1
    page.reload()
    assert page.locator(".proposal").count() == 0 and "No merge proposals are waiting" in page.content()


def test_the_dashboard_shows_its_ranking_panel_once_the_page_has_loaded(page, live_server, demo):
    from knowledge.feedback import feedback_record
    from knowledge.search_log import search_log_record
    from tests.callers import acting

    item = demo["items"][0]
    log = search_log_record(principal="agent:a", readable_scopes=None, query="selenium login", top_k=5, min_score=3,
                            types=None, scopes=None, rank="quality", filters=None, result_ids=[item.id])
    feedback_record(acting(), knowledge_id=item.id, helpful=True, search_id=log.pk)
    log_in(page, live_server.url, "carl", PASSWORD)  # lands on the dashboard
    page.wait_for_selector("#ranking table.ranking-weeks")
    panel = page.locator("#ranking")
    assert panel.locator("tbody tr").count() == 1 and "1.000" in panel.inner_text()
    assert "Loading the ranking" not in panel.inner_text() and panel.get_attribute("aria-busy") is None
    assert page.locator("#ranking").count() == 1 and page.locator("#ranking polyline.ndcg").count() == 1


def test_screenshots_of_the_main_pages(page, live_server, demo, tmp_path, django_user_model):
    """Renders every main page in the browser; with KNOWHUB_SCREENSHOTS=docs/screenshots, saves the README's pictures."""
    out = Path(os.environ.get("KNOWHUB_SCREENSHOTS") or tmp_path)
    out = out if out.is_absolute() else REPO_ROOT / out
    django_user_model.objects.create_superuser(username="admin", password=PASSWORD)
    log_in(page, live_server.url, "admin", PASSWORD)
    item = demo["items"][0]
    pages = {
        "dashboard": "/",
        "knowledge-list": "/knowledge/?q=selenium+login&sort=relevance",
        "knowledge-detail": f"/knowledge/{item.id}/?q=selenium+login",
        "review": "/review/",
        "conflicts": "/conflicts/",
        "resource-detail": f"/resources/{demo['secret'].id}/",
        "playground": f"/playground/?token={demo['token'].pk}&q=selenium+login&top_k=3&min_score=3&rank=quality",
    }
    phone_pages = {"phone-knowledge-list": "/knowledge/?types=tool", "phone-dashboard": "/",
                   "phone-knowledge-detail": f"/knowledge/{item.id}/"}
    saved = []
    for language, suffix in LANGUAGES.items():  # English, then Chinese beside it (dashboard-zh.png)
        use_language(page, live_server.url, language)
        page.set_viewport_size(DESKTOP)
        saved += capture(page, live_server.url, out, pages, suffix=suffix)
        assert page.get_attribute("html", "lang") == language
        page.set_viewport_size(PHONE)
        saved += capture(page, live_server.url, out, phone_pages, suffix=suffix)
    assert all(p.stat().st_size > 10_000 for p in saved) and len(saved) == 2 * (len(pages) + len(phone_pages))
    assert "DEMO-SECRET-123" not in page.content()
