"""The Chinese translation is complete: every template text is marked, every msgid translated, the .mo current.

Fast and without gettext's tools: the templates are scanned in Python (tests/i18n/template_text.py),
the .po and .mo read by tests/i18n/catalog.py. `manage.py translations` regenerates both (README).
"""
import re

import pytest

from tests.conftest import REPO_ROOT
from tests.i18n.catalog import mo_messages, po_entries
from tests.i18n.template_text import untranslated

TEMPLATES = sorted(p for p in (REPO_ROOT / "templates").rglob("*.html") if "drf_spectacular" not in p.parts)
PO = REPO_ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")
# A string argument a person would read, e.g. `|default:"not judged"` (date formats are names, not text).
LITERAL_ARGUMENT = re.compile(r'\|(?:default|default_if_none):"([^"]*[A-Za-z][^"]*)"')
# {% translate "…" %} / {% blocktranslate %} and gettext's names in Python.
MARKED_IN_TEMPLATE = re.compile(r"{%\s*(?:translate|trans)\s+[\"']|{%\s*blocktrans(?:late)?\b")


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: str(p.relative_to(REPO_ROOT / "templates")))
def test_every_visible_text_in_a_template_is_marked_for_translation(template):
    source = template.read_text(encoding="utf-8")
    assert untranslated(source) == [], "wrap these in {% translate %} / {% blocktranslate %}"
    assert LITERAL_ARGUMENT.findall(source) == [], 'use _("…") for a filter\'s text argument'


@pytest.mark.parametrize(("source", "found"), [
    ("<p>Hello</p>", ["text: Hello"]),
    ('<p>{% translate "Hello" %}</p>', []),
    ("<p>{% blocktranslate %}Hi {{ name }}{% endblocktranslate %}</p>", []),
    ("<p>{% blocktranslate trimmed %}Hi\n  {{ name }}{% endblocktranslate %}</p>", []),
    ('<input placeholder="e.g. login">', ["input[placeholder]: e.g. login"]),
    ('<button hx-confirm="Sure?">{% translate "Go" %}</button>', ["button[hx-confirm]: Sure?"]),
    ('<input type="submit" value="Send">', ["input[value]: Send"]),
    ("<p>{{ item.task }} · 3 <code>POST /api/knowledge</code></p>", []),
    ("<script>var a = 'x';</script><style>p { color: red }</style>", []),
    ("{# a comment #}{% comment %}Notes{% endcomment %}<title>KnowHub</title>", []),
    # Django never reads a tag across lines: such a translate tag is shown as it is
    ('<p>{% translate "Half\nof it" %}</p>', ['text: {% translate "Half of it" %}']),
])
def test_the_template_scan_finds_unmarked_text_only(source, found):
    assert untranslated(source) == found


def test_every_message_has_a_chinese_translation():
    entries = po_entries(PO)
    assert len(entries) > 300  # the UI's and the API's messages, not an empty catalogue
    untranslated_ids = [e.msgid for e in entries if not all(e.msgstr.values()) or not e.msgstr]
    fuzzy = [e.msgid for e in entries if "fuzzy" in e.flags]
    assert untranslated_ids == [] and fuzzy == [], "translate these in locale/zh_Hans/LC_MESSAGES/django.po"


def test_the_compiled_catalogue_matches_the_po():
    compiled = mo_messages(MO)
    expected = {e.key: e.translation for e in po_entries(PO)}
    stale = {key for key in expected if compiled.get(key) != expected[key]}
    assert stale == set(), "run `manage.py translations` to compile locale/zh_Hans/LC_MESSAGES/django.mo"
    assert set(compiled) - {""} == set(expected)


def test_every_template_that_marks_text_is_in_the_catalogue():
    """A template edited without re-extracting: its messages would show in English."""
    known = {e.msgid for e in po_entries(PO)}
    simple = re.compile(r'{%\s*translate\s+"([^"]+)"(?:\s+context\s+"[^"]*")?\s*(?:as \w+\s*)?%}')
    missing = {(t.name, m) for t in TEMPLATES for m in simple.findall(t.read_text(encoding="utf-8"))
               if m.replace("%", "%%") not in known and m not in known}
    assert missing == set(), "run `manage.py translations` and translate the new entries"
