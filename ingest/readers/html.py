"""The HTML reader (BeautifulSoup): `read` drops page chrome (scripts, navigation, headers, footers, forms),
reads the <main> element, else the outermost <article>s, else the body, into blocks under their <h1>-<h6>
headings (lists, tables and <pre> code included), and takes the first <h1>, else the <title>, as the title.
"""
from __future__ import annotations

import re

from ingest.readers.base import Extracted
from ingest.readers.text import _clean, _fenced, _inline, _Outline, decode_text

_NOISE = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "svg", "template", "iframe")
_SKIPPED = {"head", "title", "meta", "link", "base", "button", "select", "option", "textarea", "datalist"}
_INLINE = {
    "a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "del", "dfn", "em", "font", "i", "img", "ins",
    "kbd", "label", "mark", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup", "time", "tt",
    "u", "var", "wbr",
}
_TEXT_BLOCKS = {"p", "blockquote", "dt", "dd", "li", "figcaption", "address", "summary"}


def _hidden(tag) -> bool:
    return tag.has_attr("hidden") or str(tag.get("aria-hidden", "")).lower() == "true"


def _html_text(node, *, skip: tuple[str, ...] = ()) -> str:
    """The text of `node`: block-level children and <br> separate words, inline ones do not."""
    from bs4 import NavigableString, Tag

    parts: list[str] = []

    def visit(parent) -> None:
        for child in parent.children:
            if isinstance(child, Tag):
                if child.name in _SKIPPED or child.name in skip or _hidden(child):
                    continue
                if child.name == "br":
                    parts.append("\n")
                    continue
                block = child.name not in _INLINE
                parts.append("\n" if block else "")
                visit(child)
                parts.append("\n" if block else "")
            elif type(child) is NavigableString:  # not a comment, doctype or CDATA
                parts.append(str(child))

    visit(node)
    return "".join(parts)


def _html_list(tag, depth: int = 0) -> list[str]:
    lines = []
    items = tag.find_all("li", recursive=False)
    for number, item in enumerate(items, start=1):
        marker = f"{number}." if tag.name == "ol" else "-"
        text = _inline(_html_text(item, skip=("ul", "ol")))
        if text:
            lines.append(f"{'  ' * depth}{marker} {text}")
        for nested in item.find_all(["ul", "ol"]):
            if nested.find_parent("li") is item:
                lines.extend(_html_list(nested, depth + 1))
    if not items:
        text = _inline(_html_text(tag))
        return [text] if text else []
    return lines


def _html_table(table) -> str:
    lines = []
    caption = table.find("caption")
    if caption is not None:
        lines.append(_inline(_html_text(caption)))
    for row in table.find_all("tr"):
        if row.find_parent("table") is not table:
            continue
        cells = [_inline(_html_text(cell)) for cell in row.find_all(["th", "td"], recursive=False)]
        if any(cells):
            lines.append(" | ".join(cells))
    return "\n".join(line for line in lines if line)


def _html_code(pre) -> str:
    language = ""
    for tag in (pre, pre.find("code")):
        for name in (tag.get("class") or []) if tag is not None else []:
            if name.startswith(("language-", "lang-")):
                language = name.split("-", 1)[1]
    return _fenced(pre.get_text(), language)


def read(data: bytes) -> Extracted:
    from bs4 import BeautifulSoup, NavigableString, Tag

    soup = BeautifulSoup(_clean(decode_text(data, html=True)), "html.parser")
    page_title = soup.find("title")
    for tag in soup.find_all(_NOISE):
        if not tag.decomposed:
            tag.decompose()
    main = soup.find("main")
    articles = [tag for tag in soup.find_all("article") if tag.find_parent("article") is None]
    roots = [main] if main is not None else articles or [soup.body or soup]
    outline = _Outline()
    pending: list[str] = []

    def flush_inline() -> None:
        if pending:
            outline.add(_inline("".join(pending)))
            pending.clear()

    def walk(parent) -> None:
        for child in parent.children:
            if not isinstance(child, Tag):
                if type(child) is NavigableString:
                    pending.append(str(child))
                continue
            name = child.name
            if name in _SKIPPED or _hidden(child):
                continue
            if name in _INLINE or name == "br":
                pending.append(_html_text(child) if name != "br" else "\n")
                continue
            flush_inline()
            if re.fullmatch(r"h[1-6]", name):
                outline.heading(int(name[1]), _html_text(child))
            elif name in ("ul", "ol"):
                outline.add("\n".join(_html_list(child)))
            elif name == "pre":
                outline.add(_html_code(child))
            elif name == "table":
                outline.add(_html_table(child))
            elif name in _TEXT_BLOCKS:
                outline.add(_inline(_html_text(child)))
            else:
                walk(child)
            flush_inline()

    h1 = None
    for root in roots:
        walk(root)
        flush_inline()
        h1 = h1 or root.find("h1")
    title = _inline(_clean(_html_text(h1))) if h1 is not None else ""
    if not title and page_title is not None:
        title = _inline(_clean(page_title.get_text()))
    return Extracted(title=title, blocks=outline.blocks)
