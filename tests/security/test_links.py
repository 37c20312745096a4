"""Stored text becomes a link only when it is an absolute http(s) URL (issue 12, item 4)."""
import re

import pytest

from curation.links import http_url
from tests.factories import make_knowledge

UNSAFE = [
    "javascript:window.x=1",
    "JaVaScRiPt:window.x=1",
    "\tjavascript:window.x=1",
    " \x00javascript:window.x=1",
    "\x01javascript:window.x=1",
    "java\nscript:window.x=1",
    "java\tscript:window.x=1",
    "data:text/html,<script>window.x=1</script>",
    "vbscript:msgbox(1)",
    "//evil.example.com/",
    "/relative/path",
    "https:no-host",
    "http://[::1",
    "",
]


@pytest.mark.parametrize("text", UNSAFE)
def test_unsafe_or_relative_text_is_not_a_link(text):
    assert http_url(text) is None


@pytest.mark.parametrize("text, href", [
    ("https://example.com/a?b=1#c", "https://example.com/a?b=1#c"),
    ("HTTP://Example.com", "HTTP://Example.com"),
    ("  https://example.com/padded \n", "https://example.com/padded"),
    ("https://exa\tmple.com/", "https://example.com/"),
])
def test_http_and_https_urls_are_links_as_the_browser_reads_them(text, href):
    assert http_url(text) == href


def test_non_text_is_not_a_link():
    assert http_url(None) is None and http_url(["https://example.com"]) is None


@pytest.mark.django_db
def test_item_page_links_only_the_http_source_urls(viewer_client):
    stored = ["javascript:window.x=1", "JaVaScRiPt:window.x=1", "\tjavascript:window.x=1", "\x01javascript:window.x=1",
              "data:text/html,<script>window.x=1</script>"]  # PostgreSQL's JSON cannot hold \x00
    item = make_knowledge(source={"urls": ["https://docs.example.com/guide", *stored]})
    page = viewer_client.get(f"/knowledge/{item.id}/").content.decode()
    assert '<a href="https://docs.example.com/guide" rel="noopener noreferrer">' in page
    assert page.count('class="unlinked"') == 5
    anchors = re.findall(r'<a [^>]*href="([^"]*)"', page)
    assert [href for href in anchors if not href.startswith(("/", "?", "#"))] == ["https://docs.example.com/guide"]
    assert "JaVaScRiPt:window.x=1" in page  # still shown, as text
