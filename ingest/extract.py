"""Text out of documents: which kind a file is, and its title and blocks under their headings.

Owns the format knowledge for Markdown, plain text, HTML (BeautifulSoup), PDF (pypdf) and DOCX
(python-docx): `kind_of` names the kind from a file name or content type, `extract` turns the bytes into
an `Extracted` (a title and `Block`s: paragraphs, lists, code, tables, each with its enclosing headings).
Pure functions, no database and no network; `ingest.chunking` turns the blocks into chunks.

Conventions shared by every kind: text is whitespace-normalised (runs of spaces and line breaks become one
space, a line break between two CJK characters disappears), except lists and tables (one line per item or
row) and code (kept verbatim, fenced with ``` so `chunking` can tell it is code; an HTML <pre> is fenced
too). NUL characters are removed and lone surrogates replaced, and a block never has empty text.
"""
from __future__ import annotations

import codecs
import io
import re
from dataclasses import dataclass

KINDS = ("markdown", "text", "html", "pdf", "docx")
EXTENSIONS = {
    ".md": "markdown", ".markdown": "markdown", ".txt": "text", ".text": "text",
    ".html": "html", ".htm": "html", ".pdf": "pdf", ".docx": "docx",
}
CONTENT_TYPES = {
    "text/markdown": "markdown", "text/x-markdown": "markdown", "text/plain": "text",
    "text/html": "html", "application/xhtml+xml": "html", "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
}
SUPPORTED = "Markdown (.md, .markdown), text (.txt, .text), HTML (.html, .htm), PDF (.pdf) or DOCX (.docx)"


class UnsupportedDocument(ValueError):
    """The document is of no kind we read (the API answers 415/400 naming `field`)."""

    def __init__(self, message: str, field: str = "file"):
        super().__init__(message)
        self.field = field


class ExtractionError(ValueError):
    """A document of a known kind that cannot be read (corrupt, truncated, password-protected)."""

    def __init__(self, message: str, field: str = "file"):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Block:
    text: str
    headings: tuple[str, ...]  # the enclosing headings, outermost first


@dataclass(frozen=True)
class Extracted:
    title: str
    blocks: list[Block]


def kind_of(filename: str | None, content_type: str | None = None) -> str:
    """The kind (one of KINDS) from the file name's extension, else from the content type."""
    if filename:
        name = filename.replace("\\", "/").rsplit("/", 1)[-1]
        if "." in name:
            extension = "." + name.rsplit(".", 1)[1].strip().lower()
            if extension in EXTENSIONS:
                return EXTENSIONS[extension]
    if content_type:
        media_type = content_type.split(";", 1)[0].strip().lower()
        if media_type in CONTENT_TYPES:
            return CONTENT_TYPES[media_type]
    given = [f"file name {filename!r}" if filename else "", f"content type {content_type!r}" if content_type else ""]
    described = " and ".join(part for part in given if part) or "no file name or content type"
    raise UnsupportedDocument(f"unsupported document type ({described}): upload {SUPPORTED}")


def extract(data: bytes, kind: str) -> Extracted:
    """The title and blocks of `data`, read as `kind`; ExtractionError if it cannot be read."""
    readers = {"markdown": _markdown, "text": _text, "html": _html, "pdf": _pdf, "docx": _docx}
    if kind not in readers:
        raise UnsupportedDocument(f"unknown document kind {kind!r}: expected one of {', '.join(KINDS)}")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"extract() needs bytes, not {type(data).__name__}")
    try:
        return readers[kind](bytes(data))
    except RecursionError:
        raise ExtractionError(f"the {kind} document nests too deeply to be read") from None


# --- Shared text handling ---------------------------------------------------------------------------------

_SURROGATES = re.compile("[\ud800-\udfff]")
_CJK = re.compile("[\u2e80-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
_LIST_ITEM = re.compile(r"^([ \t]*)([-*+•]|\d{1,9}[.)])(?:[ \t]+(.*))?$")


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


# --- Markdown and text ------------------------------------------------------------------------------------

_FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})(.*)$")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_THEMATIC = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_QUOTE = re.compile(r"^ {0,3}>[ \t]?(.*)$")
_TABLE_DELIMITER = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")


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


def _markdown(data: bytes) -> Extracted:
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
            if (line[0] in " \t" or not gap_in_list) and not _ATX.match(line) and not _THEMATIC.match(line):
                items[-1] = f"{items[-1]} {_inline(line)}"  # a continuation of the item
                gap_in_list = False
                continue
            flush()
        atx = _ATX.match(line)
        if atx:
            flush()
            heading(len(atx.group(1)), atx.group(2) or "")
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


def _text(data: bytes) -> Extracted:
    outline = _Outline()
    paragraph: list[str] = []
    for line in [*_lines_of(data), ""]:
        if line.strip():
            paragraph.append(line)
        elif paragraph:
            outline.add(_paragraph(paragraph))
            paragraph = []
    return Extracted(title="", blocks=outline.blocks)


# --- HTML -------------------------------------------------------------------------------------------------

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


def _html(data: bytes) -> Extracted:
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


# --- PDF --------------------------------------------------------------------------------------------------

_PLACEHOLDER_TITLES = {"untitled", "(untitled)", "(unspecified)", "(anonymous)"}
_FINAL_PUNCTUATION = ".!?,;:。！？，；：、"


def _starts_sentence(line: str) -> bool:
    line = line.lstrip("\"'“‘([ ")
    return bool(line) and (line[0].isupper() or line[0].isdigit() or line[0] in "•-–*" or bool(_CJK.match(line[0])))


def _pdf_paragraphs(page_text: str) -> list[list[str]]:
    """A page's paragraphs, each a list of lines.

    Split on blank lines when the page has any between its lines; else after a line shorter than the page's
    full lines (under 85% of the longest) that does not end mid-clause, when the next line starts a new
    sentence: that is a paragraph's last line, or a heading.
    """
    lines = [" ".join(line.split()) for line in page_text.split("\n")]
    filled = [index for index, line in enumerate(lines) if line]
    if not filled:
        return []
    lines = lines[filled[0]:filled[-1] + 1]
    has_blank_lines = not all(lines)
    full = max(len(line) for line in lines)
    paragraphs: list[list[str]] = []
    current: list[str] = []
    for index, line in enumerate(lines):
        if not line:
            if current:
                paragraphs.append(current)
            current = []
            continue
        current.append(line)
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if has_blank_lines or not following:
            continue
        if len(line) < 0.85 * full and not line.endswith((",", ";", "-", "–", "，", "；", "、")) \
                and _starts_sentence(following):
            paragraphs.append(current)
            current = []
    if current:
        paragraphs.append(current)
    return paragraphs


def _pdf(data: bytes) -> Extracted:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception as exc:  # e.g. an encryption pypdf needs an extra package for
                raise ExtractionError(f"the PDF is encrypted and cannot be opened: {exc}") from None
            if not opened:
                raise ExtractionError("the PDF is encrypted with a password: upload an unprotected copy")
        metadata = reader.metadata
        title = _clean(str((metadata.title if metadata else None) or "")).strip()
        pages = list(reader.pages)
    except ExtractionError:
        raise
    except Exception as exc:
        reason = exc or type(exc).__name__
        raise ExtractionError(f"the PDF cannot be read, it may be corrupt or truncated ({reason})") from None
    if title.lower() in _PLACEHOLDER_TITLES:
        title = ""
    paragraphs: list[list[str]] = []
    for number, page in enumerate(pages, start=1):
        try:
            text = page.extract_text() or ""
        except Exception as exc:
            raise ExtractionError(f"page {number} of the PDF cannot be read ({exc or type(exc).__name__})") from None
        paragraphs.extend(_pdf_paragraphs(_clean(text).replace("\r", "\n")))

    def heading_like(lines: list[str]) -> bool:
        line = lines[0]
        return len(lines) == 1 and len(line) <= 80 and not line.endswith(tuple(_FINAL_PUNCTUATION)) \
            and any(ch.isalpha() for ch in line)

    outline = _Outline()
    for index, lines in enumerate(paragraphs):
        following = paragraphs[index + 1] if index + 1 < len(paragraphs) else None
        if heading_like(lines) and following and not heading_like(following) \
                and len(_inline("\n".join(following))) > len(lines[0]):
            outline.heading(1, lines[0])
        else:
            outline.add(_inline("\n".join(lines)))
    return Extracted(title=title, blocks=outline.blocks)


# --- DOCX -------------------------------------------------------------------------------------------------

_DOCX_HEADING = re.compile(r"^heading\s*([1-9])$", re.I)


def _docx_table(table) -> str:
    lines = []
    for row in table.rows:
        seen, cells = set(), []
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell appears once per grid column it spans
                continue
            seen.add(id(cell._tc))
            cells.append(_inline(_clean(cell.text)))
        if any(cells):
            lines.append(" | ".join(cells))
    return "\n".join(lines)


def _docx(data: bytes) -> Extracted:
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
        core_title = document.core_properties.title or ""
        content = list(document.iter_inner_content())
    except Exception as exc:
        raise ExtractionError(f"the file is not a readable DOCX document ({exc or type(exc).__name__})") from None
    title = _inline(_clean(core_title))
    outline = _Outline()
    items: list[str] = []
    numbers: dict[int, int] = {}

    def flush_list() -> None:
        if items:
            outline.add("\n".join(items))
            items.clear()
            numbers.clear()

    for element in content:
        if isinstance(element, Table):
            flush_list()
            outline.add(_docx_table(element))
            continue
        style = (element.style.name if element.style is not None else "") or ""
        text = _inline(_clean(element.text))
        if style.lower().startswith("list"):
            if text:
                level = int(style[-1]) - 1 if style[-1].isdigit() else 0
                numbers[level] = numbers.get(level, 0) + 1
                for deeper in [key for key in numbers if key > level]:
                    del numbers[deeper]
                marker = f"{numbers[level]}." if "number" in style.lower() else "-"
                items.append(f"{'  ' * level}{marker} {text}")
            continue
        flush_list()
        heading = _DOCX_HEADING.match(style.strip())
        if style.strip().lower() == "title":
            text = outline.heading(0, text)
            title = title or text
        elif heading:
            outline.heading(int(heading.group(1)), text)
        else:
            outline.add(text)
    flush_list()
    return Extracted(title=title, blocks=outline.blocks)
