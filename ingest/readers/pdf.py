"""The PDF reader (pypdf): `read` opens the document (an empty user password is tried on encrypted files),
takes the metadata title unless it is a placeholder, splits each page's text into paragraphs and treats a
short, unpunctuated one-line paragraph before a longer one as a heading; unreadable files raise
`ExtractionError`.
"""
from __future__ import annotations

import io

from ingest.readers.base import Extracted, ExtractionError
from ingest.readers.text import _CJK, _clean, _inline, _Outline

# A few kilobytes of PDF can declare thousands of pages sharing one content stream: what is read is bounded.
MAX_PAGES = 2_000
MAX_CHARACTERS = 20_000_000
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


def read(data: bytes) -> Extracted:
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
    if len(pages) > MAX_PAGES:
        raise ExtractionError(f"the PDF has {len(pages):,} pages, more than {MAX_PAGES:,}: split it")
    paragraphs: list[list[str]] = []
    characters = 0
    for number, page in enumerate(pages, start=1):
        try:
            text = page.extract_text() or ""
        except Exception as exc:
            raise ExtractionError(f"page {number} of the PDF cannot be read ({exc or type(exc).__name__})") from None
        characters += len(text)
        if characters > MAX_CHARACTERS:
            raise ExtractionError(f"the PDF holds more than {MAX_CHARACTERS:,} characters of text (by page {number}): "
                                  "split it")
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
