"""Visible text in a Django template that is not marked for translation.

The template is reduced to what a person would read if nothing were translated: comments,
`{% translate %}` / `{% blocktranslate %}` blocks, `{{ variables }}` and other tags are removed,
then the HTML is walked for text nodes and the attributes people read (title, placeholder,
aria-label, alt, hx-confirm, a button's value). Whatever still holds letters, outside
<script>, <style> and <code>, and not in ALLOWED, is untranslated.
"""
import re
from html.parser import HTMLParser

# The product's name, metric names, "v3" as a version label, an example scope; words, not sentences.
ALLOWED = {"KnowHub", "nDCG@10", "MRR@10", "v", "URL", "org:acme"}
HUMAN_ATTRIBUTES = {"title", "placeholder", "aria-label", "alt", "hx-confirm"}
SKIPPED_ELEMENTS = {"script", "style", "code"}

# Like Django's lexer, a tag never spans lines (a multi-line {% translate %} would be shown as it is).
_COMMENTS = re.compile(r"{%\s*comment\s*%}.*?{%\s*endcomment\s*%}|{#[^\n]*?#}", re.S)
_BLOCKTRANSLATE = re.compile(r"{%\s*blocktrans(?:late)?\b[^\n]*?%}.*?{%\s*endblocktrans(?:late)?\s*%}", re.S)
_TAGS = re.compile(r"{%.*?%}|{{.*?}}")
_LETTERS = re.compile(r"[^\W\d_]")


def strip_template(source: str) -> str:
    """The template's HTML with every translated message and every template tag removed."""
    for pattern in (_COMMENTS, _BLOCKTRANSLATE, _TAGS):
        source = pattern.sub(" ", source)
    return source


class _Finder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.skipping = []
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        for name, value in attrs:
            if value and (name in HUMAN_ATTRIBUTES or (name == "value" and attributes.get("type") in ("submit", "button"))):
                self._check(value, f"{tag}[{name}]")
        if tag in SKIPPED_ELEMENTS:
            self.skipping.append(tag)

    def handle_endtag(self, tag):
        if self.skipping and self.skipping[-1] == tag:
            self.skipping.pop()

    def handle_data(self, data):
        if not self.skipping:
            self._check(data, "text")

    def _check(self, text, where):
        words = [word for word in text.split() if word not in ALLOWED]
        if any(_LETTERS.search(word) for word in words):
            self.found.append(f"{where}: {' '.join(words)}")


def untranslated(source: str) -> list[str]:
    """Each piece of visible text in a template source that is not inside a translation tag."""
    finder = _Finder()
    finder.feed(strip_template(source))
    finder.close()
    return finder.found
