"""English by default, Chinese when asked (Accept-Language or the header's switcher), remembered in a cookie."""
from datetime import datetime, timezone

import pytest
from django.conf import settings
from django.test import Client

from knowledge.models import Knowledge
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db
CHINESE = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}
CREATED = datetime(2026, 3, 5, 14, 7, tzinfo=timezone.utc)


def _item():
    item = make_knowledge(task="Rotate the staging keys", embed=False)
    Knowledge.objects.filter(pk=item.pk).update(created_at=CREATED, updated_at=CREATED)
    return item


def test_without_a_language_the_pages_are_english(viewer_client):
    body = viewer_client.get("/").content.decode()
    assert '<html lang="en">' in body and "<h1>Dashboard</h1>" in body and "Log out" in body


def test_accept_language_chinese_gives_chinese_pages(viewer_client):
    body = viewer_client.get("/", **CHINESE).content.decode()
    assert '<html lang="zh-hans">' in body and "<h1>概览</h1>" in body and "退出登录" in body


def test_the_login_page_has_the_switcher_and_shows_the_current_language(client):
    english = client.get("/login/").content.decode()
    assert 'action="/i18n/setlang/"' in english and '<span class="current" aria-current="true" lang="en">English</span>' in english
    assert 'name="language" value="zh-hans"' in english and "csrfmiddlewaretoken" in english
    chinese = client.get("/login/", **CHINESE).content.decode()
    assert "<h1>登录</h1>" in chinese and 'aria-current="true" lang="zh-hans">简体中文</span>' in chinese


def test_switching_language_is_remembered_across_pages(viewer_client):
    response = viewer_client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/knowledge/"})
    assert response.status_code == 302 and response["Location"] == "/knowledge/"
    assert viewer_client.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    assert "<h1>知识</h1>" in viewer_client.get("/knowledge/").content.decode()
    assert "<h1>概览</h1>" in viewer_client.get("/").content.decode()  # the cookie, not the header
    viewer_client.post("/i18n/setlang/", {"language": "en", "next": "/"})
    assert "<h1>Dashboard</h1>" in viewer_client.get("/", **CHINESE).content.decode()  # the choice beats the header


def test_a_date_is_shown_in_each_languages_format(viewer_client):
    item = _item()
    english = viewer_client.get(f"/knowledge/{item.id}/").content.decode()
    chinese = viewer_client.get(f"/knowledge/{item.id}/", **CHINESE).content.decode()
    assert "2026-03-05 14:07" in english and "2026年3月5日 14:07" not in english
    assert "2026年3月5日 14:07" in chinese and "2026-03-05 14:07" not in chinese


def test_the_knowledge_list_counts_and_dates_follow_the_language(viewer_client):
    _item()
    english = viewer_client.get("/knowledge/").content.decode()
    chinese = viewer_client.get("/knowledge/", **CHINESE).content.decode()
    assert "1 item" in english and "2026-03-05" in english
    assert "1 个条目" in chinese and "2026年3月5日" in chinese


def test_an_empty_search_says_so_in_chinese(viewer_client):
    body = viewer_client.get("/knowledge/?q=zzzz-nothing", **CHINESE).content.decode()
    assert "没有匹配" in body and "zzzz-nothing" in body


def test_stored_statuses_stay_identifiers_but_read_translated(viewer_client):
    _item()
    body = viewer_client.get("/", **CHINESE).content.decode()
    assert '<a href="/knowledge/?status=active">有效</a>' in body


def test_form_errors_are_translated(curator_client):
    item = _item()
    response = curator_client.post(f"/knowledge/{item.id}/edit/", {"task": "", "content": "x", "types": ["tool"]},
                                   HTTP_HX_REQUEST="true", **CHINESE)
    assert response.status_code == 422 and "任务: 该字段是必填项。" in response.content.decode()


def test_error_pages_follow_the_language(viewer_client):
    assert "<h1>未找到</h1>" in viewer_client.get("/no-such-page/", **CHINESE).content.decode()
    assert "<h1>Not found</h1>" in viewer_client.get("/no-such-page/").content.decode()


@pytest.fixture
def admin_site_client(client, curator):
    """Logged in as the superuser `ensure_curator` makes, who uses the Django admin."""
    client.force_login(curator)
    return client


def test_the_admin_has_the_same_switcher_on_its_pages_and_its_login(admin_site_client):
    switcher = 'action="/i18n/setlang/"'
    assert switcher in Client().get("/admin/login/").content.decode()
    english = admin_site_client.get("/admin/").content.decode()
    assert switcher in english and 'name="language" value="zh-hans"' in english
    assert '<input type="hidden" name="next" value="/admin/">' in english
    chinese = admin_site_client.get("/admin/", **CHINESE).content.decode()
    assert 'aria-current="true" lang="zh-hans">简体中文</span>' in chinese and 'name="language" value="en"' in chinese


def test_switching_from_the_admin_returns_to_it_in_chinese(admin_site_client):
    response = admin_site_client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/admin/"})
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert "站点管理" in admin_site_client.get("/admin/").content.decode()  # Django's own admin text, in Chinese
