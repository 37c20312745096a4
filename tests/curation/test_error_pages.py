"""Requests Django refuses before any view (a Host not allowed, a form over the size limit): the API's error shape
under /api/, a 413 page for an oversized form, and a warning line without a traceback in the log."""
import logging
import sys

import pytest

from core.logs import SuspiciousRequestAsWarning, logging_config
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/api/knowledge/filters", "/api/knowledge/search?q=x", "/healthz"])
def test_a_host_not_allowed_is_a_json_400_under_the_api(client, path):
    response = client.get(path, HTTP_HOST="evil.example")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "bad_host"


def test_a_host_not_allowed_on_a_page_is_the_html_400(client):
    response = client.get("/login/", HTTP_HOST="evil.example")
    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")


def test_a_form_over_the_size_limit_is_a_413_page_not_a_400(curator_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    item = make_knowledge()
    response = curator_client.post(f"/knowledge/{item.id}/edit/", {"task": "t", "content": "x" * 20_000})
    assert response.status_code == 413 and response["Content-Type"].startswith("text/html")
    assert "10,000" in response.content.decode()
    item.refresh_from_db()
    assert item.content != "x" * 20_000


def test_djangos_suspicious_request_lines_are_warnings_without_a_traceback_and_other_errors_keep_theirs():
    assert "suspicious_request_as_warning" in logging_config(log_format="json", level="INFO")["handlers"]["console"]["filters"]
    try:
        raise ValueError("boom")
    except ValueError:
        exc_info = sys.exc_info()
    host = logging.LogRecord("django.security.DisallowedHost", logging.ERROR, __file__, 1, "Invalid HTTP_HOST", (),
                             exc_info)
    ours = logging.LogRecord("knowledge.tasks", logging.ERROR, __file__, 1, "failed", (), exc_info)
    keep = SuspiciousRequestAsWarning()
    assert keep.filter(host) and keep.filter(ours)
    assert (host.levelname, host.exc_info) == ("WARNING", None)
    assert (ours.levelname, ours.exc_info) == ("ERROR", exc_info)
