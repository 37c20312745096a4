"""The main flows in chromium in English and in Chinese, and the header's switcher remembering the choice.

A browser set to Chinese (`locale="zh-CN"`, so Accept-Language: zh-CN) gets Chinese pages with nothing else
to do; the switcher's choice (a cookie) then holds across reloads and pages, and beats the header.
"""
import pytest
from django.contrib.auth.models import Group

from curation.screenshots import DESKTOP, log_in
from knowledge.models import Knowledge
from tests.curation.conftest import checked_page
from tests.curation.demo import make_demo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-for-browser-tests"

TEXT = {
    "en": {"locale": "en-US", "lang": "en", "login": "Log in", "dashboard": "Dashboard", "knowledge": "Knowledge",
           "no_matches": "No matches", "fields": "Fields", "recorded": "Recorded a helpful report.",
           "saved": "Saved. The previous text is kept as version 1.", "date": "-", "items": "items"},
    "zh-hans": {"locale": "zh-CN", "lang": "zh-hans", "login": "登录", "dashboard": "概览", "knowledge": "知识",
                "no_matches": "没有匹配", "fields": "字段", "recorded": "已记录一次“有用”反馈。",
                "saved": "已保存。之前的文本保留为版本 1。", "date": "年", "items": "个条目"},
}


@pytest.fixture
def demo(django_user_model):
    user = django_user_model.objects.create_user(username="carl", password=PASSWORD)
    user.groups.add(Group.objects.get(name="curator"))
    return make_demo()


@pytest.fixture(params=list(TEXT))
def language(request):
    return request.param


@pytest.fixture
def page(chromium, language):
    yield from checked_page(chromium, DESKTOP, locale=TEXT[language]["locale"])


def test_main_flows_in_the_browsers_language(page, live_server, demo, language):
    text, url = TEXT[language], live_server.url
    page.goto(f"{url}/login/")
    assert page.get_attribute("html", "lang") == text["lang"] and page.inner_text("h1") == text["login"]
    log_in(page, url, "carl", PASSWORD)
    assert page.inner_text("h1") == text["dashboard"]
    assert page.inner_text(".languages .current") == {"en": "English", "zh-hans": "简体中文"}[language]

    page.goto(f"{url}/knowledge/")
    assert page.inner_text("h1") == text["knowledge"] and text["items"] in page.inner_text("#results .meta")
    page.fill("#id_q", "zzqx vrrk nothing like this")  # live search, swapped in by htmx
    page.wait_for_selector("#no-matches")
    assert text["no_matches"] in page.inner_text("#no-matches")

    item = demo["items"][5]  # no feedback yet
    page.goto(f"{url}/knowledge/{item.id}/")
    assert text["fields"] in page.inner_text("#fields h2") and text["date"] in page.inner_text("#fields")
    page.click("#feedback button[value=helpful]")
    page.wait_for_function("document.querySelector('#helpful-count').innerText === '1'")
    assert text["recorded"] in page.inner_text("#feedback")

    page.click(f"#content button[hx-get='/knowledge/{item.id}/edit/']")
    page.fill("textarea[name=content]", "Reuse the cookies; rotate proxies every 50 requests.")
    page.click("#content button.primary")
    page.wait_for_selector("#content p.ok")
    assert page.inner_text("#content p.ok") == text["saved"]
    assert Knowledge.objects.get(pk=item.pk).helpful == 1


def test_the_switcher_choice_holds_across_reloads_and_pages(chromium, live_server, demo):
    url = live_server.url
    for page in checked_page(chromium, DESKTOP, locale="en-US"):
        log_in(page, url, "carl", PASSWORD)
        page.goto(f"{url}/knowledge/")
        assert page.inner_text("h1") == "Knowledge"
        page.click(".languages button[value=zh-hans]")
        page.wait_for_url(f"{url}/knowledge/")  # back where it was
        assert page.inner_text("h1") == "知识" and page.inner_text(".languages .current") == "简体中文"
        page.reload()
        assert page.inner_text("h1") == "知识"
        page.click("nav a[href='/']")
        assert page.inner_text("h1") == "概览"
        page.click(".languages button[value=en]")
        page.wait_for_url(f"{url}/")
        assert page.inner_text("h1") == "Dashboard"


def test_chinese_pages_fit_a_phone(chromium, live_server, demo):
    """Chinese labels are shorter but the header carries the switcher too: no page scrolls sideways on a phone."""
    from curation.screenshots import PHONE
    from tests.curation.test_layout_browser import no_horizontal_scroll

    url, item = live_server.url, demo["items"][0]
    for page in checked_page(chromium, PHONE, locale="zh-CN"):
        log_in(page, url, "carl", PASSWORD)
        for path in ("/", "/knowledge/", f"/knowledge/{item.id}/", "/review/", "/conflicts/", "/documents/"):
            page.goto(url + path)
            assert page.get_attribute("html", "lang") == "zh-hans"
            no_horizontal_scroll(page)
