"""The DOCX reader (python-docx): `read` walks paragraphs and tables in document order, mapping the Title and
Heading 1-9 styles to headings and the List styles to list items (numbered or bulleted, indented by level),
and takes the core-properties title, else the first Title paragraph, as the title; unreadable files raise
`ExtractionError`.
"""
from __future__ import annotations

import io
import re

from ingest.readers.archives import ArchiveRefused, open_bounded
from ingest.readers.base import Extracted, ExtractionError
from ingest.readers.text import _clean, _inline, _Outline

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


def _paragraph_styles(document):
    """A paragraph's style name, from a table of the document's paragraph styles built once: python-docx's
    `paragraph.style` searches every style for each paragraph (a small file of thousands of styles and paragraphs
    took minutes). Unknown or missing ids are the default paragraph style's, as python-docx has them."""
    from docx.enum.style import WD_STYLE_TYPE
    from docx.styles import BabelFish

    names, default = {}, ""
    for style in document.styles.element.style_lst:
        if style.type != WD_STYLE_TYPE.PARAGRAPH or style.styleId is None:
            continue
        name = BabelFish.internal2ui(style.name_val or "")
        names.setdefault(style.styleId, name)
        if style.default and not default:
            default = name

    def style_of(paragraph) -> str:
        return names.get(paragraph._p.style, default) if paragraph._p.style is not None else default

    return style_of


def read(data: bytes) -> Extracted:
    import docx
    from docx.table import Table

    try:
        open_bounded(data, "the DOCX file")
    except ArchiveRefused as exc:
        if exc.not_a_zip:
            raise ExtractionError(f"the file is not a readable DOCX document ({exc})") from None
        raise ExtractionError(str(exc)) from None
    try:
        document = docx.Document(io.BytesIO(data))
        core_title = document.core_properties.title or ""
        content = list(document.iter_inner_content())
    except Exception as exc:
        raise ExtractionError(f"the file is not a readable DOCX document ({exc or type(exc).__name__})") from None
    style_of = _paragraph_styles(document)
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
        style = style_of(element)
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
