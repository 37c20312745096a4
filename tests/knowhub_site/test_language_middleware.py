"""The language middleware does what Django's LocaleMiddleware does: the same language from the cookie, then
Accept-Language, then English, the same headers; Django's own code when the URLs are language-prefixed."""
from unittest import mock

import pytest
from django.conf import settings
from django.http import HttpResponse
from django.middleware.locale import LocaleMiddleware as DjangoLocaleMiddleware
from django.test import RequestFactory
from django.utils import translation

from knowhub_site import language
from knowhub_site.language import LocaleMiddleware


def answer(middleware_class, path: str, status: int = 200, cookies=None, **headers) -> tuple:
    request = RequestFactory().get(path, **headers)
    request.COOKIES.update(cookies or {})
    with translation.override(None):
        mw = middleware_class(lambda r: HttpResponse(status=status))
        mw.process_request(request)
        active = translation.get_language()
        response = mw.process_response(request, HttpResponse(status=status))
    return request.LANGUAGE_CODE, active, response.get("Vary"), response.get("Content-Language")


@pytest.mark.parametrize("path, status, headers", [
    ("/api/knowledge/knowledge-20260101-abcd", 200, {}),
    ("/api/knowledge/search", 200, {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9,en;q=0.5"}),
    ("/zh-hans/knowledge/", 404, {"HTTP_ACCEPT_LANGUAGE": "en"}),
    ("/en/", 404, {"HTTP_ACCEPT_LANGUAGE": "fr"}),
    ("/knowledge/", 200, {"cookies": {settings.LANGUAGE_COOKIE_NAME: "zh-hans"}, "HTTP_ACCEPT_LANGUAGE": "en"}),
])
def test_the_language_and_headers_are_djangos(path, status, headers):
    assert answer(LocaleMiddleware, path, status, **dict(headers)) == answer(DjangoLocaleMiddleware, path, status, **dict(headers))


def test_chinese_is_chosen_from_accept_language_on_an_api_path():
    assert answer(LocaleMiddleware, "/api/knowledge/search", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9")[:2] == ("zh-hans", "zh-hans")


def test_with_language_prefixed_urls_djangos_own_code_runs():
    with mock.patch.object(language, "is_language_prefix_patterns_used", return_value=(True, False)), \
            mock.patch.object(DjangoLocaleMiddleware, "process_request", return_value=None) as request_part, \
            mock.patch.object(DjangoLocaleMiddleware, "process_response", side_effect=lambda r, response: response) as response_part:
        request = RequestFactory().get("/en/knowledge/")
        mw = LocaleMiddleware(lambda r: HttpResponse())
        mw.process_request(request)
        mw.process_response(request, HttpResponse())
    assert request_part.called and response_part.called
