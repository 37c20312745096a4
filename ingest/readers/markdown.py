"""The Markdown reader: `read` walks the lines (YAML front matter, fenced code, ATX and setext headings,
thematic breaks, lists, block quotes, paragraphs and pipe tables) and takes the first level-1 heading as the
title.
"""
from __future__ import annotations

import re

from ingest.readers.base import Extracted
from ingest.readers.text import (
    _LIST_ITEM,
    _fenced,
    _inline,
    _lines_of,
    _list_line,
    _Outline,
    _paragraph,
)

_FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})(.*)$")
# Matched against a line without trailing blanks, and the closing #s are stripped in `_atx`: one pattern
# doing both backtracks quadratically on a long run of blanks.
_ATX_LINE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]++(.*))?$")


def _atx(line: str) -> tuple[int, str] | None:
    """An ATX heading line's level and text (without its closing #s), or None."""
    found = _ATX_LINE.match(line.rstrip(" \t"))
    if not found:
        return None
    text = found.group(2) or ""
    closed = text.rstrip("#")
    if closed != text and (not closed or closed[-1] in " \t"):
        text = closed
    return len(found.group(1)), text.rstrip(" \t")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_THEMATIC = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_QUOTE = re.compile(r"^ {0,3}>[ \t]?(.*)$")


def read(data: bytes) -> Extracted:
    lines = _lines_of(data)
    start = 0
    if lines and lines[0].strip() == "---":  # YAML front matter
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
        if end is not None:
            start = end + 1
    outline, title = _Outline(), ""
    paragraph: list[str] = []
    items: list[str] = []
    gap_in_list = False

    def flush() -> None:
        if paragraph:
            outline.add(_paragraph(paragraph))
            paragraph.clear()
        if items:
            outline.add("\n".join(items))
            items.clear()

    def heading(level: int, text: str) -> None:
        nonlocal title
        text = outline.heading(level, text)
        if level == 1 and text and not title:
            title = text

    i = start
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence and not (fence.group(2)[0] == "`" and "`" in fence.group(3)):
            flush()
            indent, marker = len(fence.group(1)), fence.group(2)
            body = []
            i += 1
            while i < len(lines):
                closing = lines[i].strip()
                if closing.startswith(marker) and set(closing) == {marker[0]}:
                    break
                body_line = lines[i]
                body.append(body_line[min(indent, len(body_line) - len(body_line.lstrip(" "))):])
                i += 1
            i += 1
            outline.add(_fenced("\n".join(body), fence.group(3).strip()))
            continue
        i += 1
        if not line.strip():
            if paragraph:
                flush()
            gap_in_list = bool(items)
            continue
        if items:
            item = _LIST_ITEM.match(line)
            if item and not _THEMATIC.match(line):
                items.append(_list_line(item))
                gap_in_list = False
                continue
            if (line[0] in " \t" or not gap_in_list) and not _atx(line) and not _THEMATIC.match(line):
                items[-1] = f"{items[-1]} {_inline(line)}"  # a continuation of the item
                gap_in_list = False
                continue
            flush()
        atx = _atx(line)
        if atx:
            flush()
            heading(*atx)
            continue
        setext = _SETEXT.match(line)
        if setext and paragraph:
            text = " ".join(paragraph)
            paragraph.clear()
            heading(1 if setext.group(1)[0] == "=" else 2, text)
            continue
        if _THEMATIC.match(line):
            flush()
            continue
        item = _LIST_ITEM.match(line)
        if item:
            flush()
            items.append(_list_line(item))
            gap_in_list = False
            continue
        quote = _QUOTE.match(line)
        paragraph.append(quote.group(1) if quote else line)
    flush()
    return Extracted(title=title, blocks=outline.blocks)
