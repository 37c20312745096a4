"""The CSP header built once per settings is the header django-csp builds for each response; per-view policies,
nonces, exemptions and setting changes are honoured as django-csp honours them."""
import pytest
from csp import middleware as stock
from csp.constants import HEADER, HEADER_REPORT_ONLY, NONCE, SELF
from django.http import HttpResponse
from django.test import RequestFactory, override_settings

from knowhub_site.csp import CSPMiddleware


def headers_of(middleware_class, *, path="/api/knowledge/x", prepare=lambda request, response: None) -> dict:
    request = RequestFactory().get(path)
    response = HttpResponse("{}")
    mw = middleware_class(lambda r: response)
    mw.process_request(request)
    prepare(request, response)
    out = mw.process_response(request, response)
    nonce = getattr(request, "_csp_nonce", None)  # random per request: shown as NONCE
    return {h: out.get(h) and out.get(h).replace(nonce or "\0", "NONCE") for h in (HEADER, HEADER_REPORT_ONLY)}


def test_a_plain_response_gets_the_header_django_csp_builds():
    assert headers_of(CSPMiddleware) == headers_of(stock.CSPMiddleware)
    assert "default-src 'self'" in headers_of(CSPMiddleware)[HEADER].split("; ")


@pytest.mark.parametrize("prepare", [
    lambda request, response: setattr(response, "_csp_update", {"img-src": ["https://example.org"]}),
    lambda request, response: setattr(response, "_csp_replace", {"script-src": None}),
    lambda request, response: setattr(response, "_csp_exempt", True),
    lambda request, response: str(request.csp_nonce),  # a template asked for a nonce
], ids=["update", "replace", "exempt", "nonce"])
def test_a_per_response_policy_is_django_csps_own(prepare):
    policy = {"DIRECTIVES": {"default-src": [SELF], "script-src": [SELF, NONCE], "img-src": [SELF]}}
    with override_settings(CONTENT_SECURITY_POLICY=policy):
        ours, theirs = headers_of(CSPMiddleware, prepare=prepare), headers_of(stock.CSPMiddleware, prepare=prepare)
        plain = headers_of(CSPMiddleware)
    assert ours == theirs
    assert ours[HEADER] != plain[HEADER]  # the response's own policy, not the one kept for plain responses


def test_a_changed_setting_changes_the_header():
    before = headers_of(CSPMiddleware)[HEADER]
    with override_settings(CONTENT_SECURITY_POLICY={"DIRECTIVES": {"default-src": ["'none'"]}},
                           CONTENT_SECURITY_POLICY_REPORT_ONLY={"DIRECTIVES": {"default-src": [SELF]}}):
        assert headers_of(CSPMiddleware) == {HEADER: "default-src 'none'", HEADER_REPORT_ONLY: "default-src 'self'"}
    assert headers_of(CSPMiddleware)[HEADER] == before


def test_an_excluded_prefix_gets_no_header():
    with override_settings(CONTENT_SECURITY_POLICY={"EXCLUDE_URL_PREFIXES": ["/api/"],
                                                    "DIRECTIVES": {"default-src": [SELF]}}):
        assert headers_of(CSPMiddleware)[HEADER] is None
        assert headers_of(CSPMiddleware, path="/login/")[HEADER] == "default-src 'self'"


def test_asking_for_a_nonce_after_the_header_is_written_is_an_error():
    request = RequestFactory().get("/")
    mw = CSPMiddleware(lambda r: HttpResponse())
    mw.process_request(request)
    mw.process_response(request, HttpResponse())
    with pytest.raises(stock.CSPNonceError):
        str(request.csp_nonce)
