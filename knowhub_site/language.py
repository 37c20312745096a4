"""Django's LocaleMiddleware without reading a language out of the URL when no URL pattern is language-prefixed.

Django's middleware reads the path's language twice per request (in the request and in the response) even when the
urlconf has no `i18n_patterns`, where it changes nothing; for /api/… it tries "api" as a language each time, a
LookupError the cache cannot keep (~1/3 of the middleware's CPU). KnowHub's language comes from the cookie, then
Accept-Language, then English. Without `i18n_patterns` this does what Django's does: the same language activated,
`request.LANGUAGE_CODE`, `Vary: Accept-Language` and `Content-Language`; with them, Django's own code runs.
"""
from django.conf import settings
from django.conf.urls.i18n import is_language_prefix_patterns_used
from django.middleware import locale
from django.utils import translation
from django.utils.cache import patch_vary_headers


def _prefixed_urls(request) -> bool:
    return is_language_prefix_patterns_used(getattr(request, "urlconf", settings.ROOT_URLCONF))[0]


class LocaleMiddleware(locale.LocaleMiddleware):
    def process_request(self, request):
        if _prefixed_urls(request):
            return super().process_request(request)
        translation.activate(translation.get_language_from_request(request, check_path=False))
        request.LANGUAGE_CODE = translation.get_language()

    def process_response(self, request, response):
        if _prefixed_urls(request):
            return super().process_response(request, response)
        patch_vary_headers(response, ("Accept-Language",))
        response.headers.setdefault("Content-Language", translation.get_language())
        return response
