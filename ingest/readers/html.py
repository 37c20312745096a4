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
    """The text of `node`: block-level children and <br> separate words, inline ones do not.

    Walked with a stack, not recursion: a page may nest its tags thousands deep."""
    from bs4 import NavigableString, Tag

    parts: list[str] = []
    stack = [(iter(node.children), "")]  # (the children still to visit, what follows their parent's text)
    while stack:
        child = next(stack[-1][0], None)
        if child is None:
            parts.append(stack.pop()[1])
        elif isinstance(child, Tag):
            if child.name in _SKIPPED or child.name in skip or _hidden(child):
                continue
            if child.name == "br":
                parts.append("\n")
                continue
            separator = "" if child.name in _INLINE else "\n"
            parts.append(separator)
            stack.append((iter(child.children), separator))
        elif type(child) is NavigableString:  # not a comment, doctype or CDATA
            parts.append(str(child))
    return "".join(parts)


_LISTS = ("ul", "ol")
# A list nested deeper than this is written at this depth: its text stays, its indentation stops growing
# (a list thousands deep would otherwise be mostly indentation, quadratic in its depth).
LIST_DEPTH_MAX = 20


def _outermost(node, names, *, skip: str) -> list:
    """The tags named `names` under `node`, in document order, not looked into, and none inside a `skip` tag: one
    pass without recursion (a page nested thousands deep costs its size, and no RecursionError)."""
    from bs4 import Tag

    found, stack = [], [iter(node.children)]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
        elif isinstance(child, Tag) and child.name in names:
            found.append(child)
        elif isinstance(child, Tag) and child.name != skip:
            stack.append(iter(child.children))
    return found


def _nested_lists(item) -> list:
    """The lists of list item `item`: the outermost <ul>/<ol> under it that are not in another <li>."""
    return _outermost(item, _LISTS, skip="li")


def _list_lines(tag, depth: int) -> list[tuple]:
    """What list `tag` at `depth` is made of, in order: ("line", text) and, for each item's lists (and a list
    written directly inside this one, as nested in the item before it), ("list", the list, depth + 1)."""
    from bs4 import Tag

    children = [child for child in tag.children if isinstance(child, Tag) and child.name in ("li", *_LISTS)]
    if not any(child.name == "li" for child in children):
        text = _inline(_html_text(tag))
        return [("line", text)] if text else []
    indent, number, parts = "  " * min(depth, LIST_DEPTH_MAX), 0, []
    for child in children:
        if child.name != "li":
            parts.append(("list", child, depth + 1))
            continue
        number += 1
        text = _inline(_html_text(child, skip=_LISTS))
        if text:
            parts.append(("line", f"{indent}{f'{number}.' if tag.name == 'ol' else '-'} {text}"))
        parts.extend(("list", nested, depth + 1) for nested in _nested_lists(child))
    return parts


def _html_list(tag) -> list[str]:
    """A list as lines ("- item", "1. item"), nested ones indented two spaces a level up to LIST_DEPTH_MAX.

    One pass with a stack, no recursion: every element is visited a bounded number of times, so a list nested
    thousands deep costs time in proportion to its size and is read whole."""
    lines: list[str] = []
    stack = [iter([("list", tag, 0)])]
    while stack:
        part = next(stack[-1], None)
        if part is None:
            stack.pop()
        elif part[0] == "line":
            lines.append(part[1])
        else:  # a list: its lines and lists come before what follows it
            stack.append(iter(_list_lines(part[1], part[2])))
    return lines


def _table_rows(table) -> list:
    """The rows of `table`: its <tr>s that are in no nested table and no other row (whose cells hold them)."""
    return _outermost(table, ("tr",), skip="table")


def _html_table(table) -> str:
    lines = []
    caption = table.find("caption")
    if caption is not None:
        lines.append(_inline(_html_text(caption)))
    for row in _table_rows(table):
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
    articles, nested = [], set()  # the outermost <article>s, each element looked at once
    for tag in soup.find_all("article"):
        if id(tag) not in nested:
            articles.append(tag)
            nested.update(id(inner) for inner in tag.find_all("article"))
    roots = [main] if main is not None else articles or [soup.body or soup]
    outline = _Outline()
    pending: list[str] = []

    def flush_inline() -> None:
        if pending:
            outline.add(_inline("".join(pending)))
            pending.clear()

    def walk(root) -> None:  # with a stack, not recursion: a page may nest its blocks thousands deep
        stack = [iter(root.children)]
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                flush_inline()  # the end of a block
                continue
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
                stack.append(iter(child.children))  # its text, then the flush at its end
                continue
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
