"""Text handling shared by the readers, and the plain-text reader: `decode_text` turns bytes into text (BOM,
UTF-8, HTML meta charset, GB18030 or Windows-1252 heuristics); `_clean`, `_inline` and `_fenced` normalise
text and code; `_Outline` collects blocks under their headings; `_lines_of` and `_paragraph` split text into
lines and paragraphs (keeping pipe tables and list items one a line); `read` reads a plain-text document.
"""
from __future__ import annotations

import codecs
import re

from ingest.readers.base import Block, Extracted

_SURROGATES = re.compile("[\ud800-\udfff]")
_CJK = re.compile("[\u2e80-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
_LIST_ITEM = re.compile(r"^([ \t]*)([-*+•]|\d{1,9}[.)])(?:[ \t]+(.*))?$")
_TABLE_DELIMITER = re.compile(r"^[ \t]*+\|?[ \t]*+:?-++:?[ \t]*+(?:\|[ \t]*+:?-++:?[ \t]*+)*+\|?[ \t]*+$")


def _clean(text: str) -> str:
    return _SURROGATES.sub("\ufffd", text.replace("\x00", ""))


def _inline(text: str) -> str:
    """One line: whitespace runs become one space; a line break between CJK characters disappears."""
    out = ""
    for line in text.splitlines():
        line = " ".join(line.split())
        if not line:
            continue
        if out and not (_CJK.match(out[-1]) and _CJK.match(line[0])):
            out += " "
        out += line
    return out


def _fenced(code: str, info: str = "") -> str:
    lines = [line.rstrip() for line in code.split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return ""
    fence = "```"
    while fence in code:
        fence += "`"
    return "\n".join([fence + info, *lines, fence])


def decode_text(data: bytes, *, html: bool = False) -> str:
    """Bytes as text: a BOM, else UTF-8, else (HTML) the meta charset, else GB18030 if it looks Chinese, else
    Windows-1252, else Latin-1. Never fails."""
    boms = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
    for bom, encoding in boms:
        if data.startswith(bom):
            return data[len(bom):].decode(encoding, "replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if html:
        declared = re.search(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", data[:8192], re.I)
        if declared:
            try:
                return data.decode(declared.group(1).decode("ascii"))
            except (LookupError, UnicodeDecodeError):
                pass
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        pass
    else:
        # Latin-1 text often decodes as GB18030 too, into rare characters whose second byte is ASCII ("ïv"
        # of "naïve"); Chinese text is mostly GB2312 characters, two bytes from 0xA1 to 0xFE.
        wide = [char for char in text if ord(char) > 0x7F]
        if sum(len(encoded := char.encode("gb18030")) == 2 and encoded[1] >= 0xA1 for char in wide) * 2 > len(wide):
            return text
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return data.decode("latin-1")


class _Outline:
    """Collects blocks under the current heading path; a heading pops the ones at its level or deeper."""

    def __init__(self) -> None:
        self.path: list[tuple[int, str]] = []
        self.blocks: list[Block] = []

    def heading(self, level: int, text: str) -> str:
        text = _inline(_clean(text))
        if text:
            while self.path and self.path[-1][0] >= level:
                self.path.pop()
            self.path.append((level, text))
        return text

    def add(self, text: str) -> None:
        text = _clean(text).strip()
        if text:
            self.blocks.append(Block(text, tuple(name for _, name in self.path)))


def _lines_of(data: bytes, *, html: bool = False) -> list[str]:
    text = _clean(decode_text(data, html=html))
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _list_line(match: re.Match) -> str:
    indent = match.group(1).replace("\t", "    ")
    return f"{indent}{match.group(2)} {_inline(match.group(3) or '')}".rstrip()


def _paragraph(lines: list[str]) -> str:
    """A paragraph's text; a pipe table keeps one row a line, and so does a line that starts a list item."""
    if len(lines) >= 2 and "|" in lines[0] and "|" in lines[1] and _TABLE_DELIMITER.match(lines[1]):
        rows = []
        for line in [lines[0], *lines[2:]]:
            cells = line.strip().removeprefix("|").removesuffix("|").split("|")
            rows.append(" | ".join(_inline(cell) for cell in cells))
        return "\n".join(rows)
    segments: list[list[str]] = []
    for line in lines:
        item = _LIST_ITEM.match(line)
        if item or not segments:
            segments.append([_list_line(item) if item else line])
        else:
            segments[-1].append(line)
    return "\n".join(_inline("\n".join(segment)) for segment in segments)


def read(data: bytes) -> Extracted:
    outline = _Outline()
    paragraph: list[str] = []
    for line in [*_lines_of(data), ""]:
        if line.strip():
            paragraph.append(line)
        elif paragraph:
            outline.add(_paragraph(paragraph))
            paragraph = []
    return Extracted(title="", blocks=outline.blocks)
