"""The PDF reader (pypdf): `read` opens the document (an empty user password is tried on encrypted files),
takes the metadata title unless it is a placeholder, counts the parsing its text asks for (`_Work`, refused past
MAX_PARSE_BYTES), splits each page's text into paragraphs and treats a short, unpunctuated one-line paragraph
before a longer one as a heading; unreadable files raise `ExtractionError`.
"""
from __future__ import annotations

import io
import time

from ingest.readers.base import Extracted, ExtractionError
from ingest.readers.text import _CJK, _clean, _inline, _Outline

# A few kilobytes of PDF can declare thousands of pages sharing one content stream: what is read is bounded.
MAX_PAGES = 2_000
MAX_CHARACTERS = 20_000_000
# The parsing is bounded too, not only the size and what is read: pypdf parses a page's content stream and builds
# the fonts of its resources again for every page, and a form XObject's again each time one is drawn, so a few
# kilobytes can ask for hours (one content stream of 1.8M operators shared by 2,000 pages, ~6 s a page; a font
# whose character map is a megabyte on every page). Before any text is read that work is added up in bytes parsed
# (`_Work`), and a PDF over MAX_PARSE_BYTES fails at once. pypdf parses 0.8-2 MB a second (text ~2 MB, the densest
# operators ~0.8 MB), so 16 MB bounds a document to 10-20 s of CPU; a text page counts 4-13 kB (reportlab, LaTeX),
# a 1,000-page book 4-13 MB. MAX_PARSE_SECONDS of CPU time, checked between pages, backs it up.
MAX_PARSE_BYTES = 16_000_000
MAX_PARSE_SECONDS = 60
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


def _character_map_entries(font) -> int:
    """The entries of a font's character map, read as pypdf builds the font."""
    try:
        from pypdf._cmap import get_encoding
    except ImportError:  # pragma: no cover - another pypdf: the map then counts by its bytes alone
        return 0
    return len(get_encoding(font)[1])


# pypdf (7 on) parses a content stream to extract its text only when it holds one of these, else scans it for them
_TEXT_OPERATORS = (b"Tj", b"TJ", b"Do", b"'", b'"')


def _skips_drawings() -> bool:
    try:
        from pypdf._text_extraction import _get_content_stream_for_text  # noqa: F401
    except ImportError:  # an older pypdf, which parses every content stream
        return False
    return True


class _TooMuchWork(Exception):
    pass


def _resolved(value):
    return value.get_object() if value is not None and hasattr(value, "get_object") else value


def _dictionary(value):
    from pypdf.generic import DictionaryObject

    value = _resolved(value)
    return value if isinstance(value, DictionaryObject) else DictionaryObject()


def _resources(obj):
    """The /Resources of a page or form, inherited from its parents as pypdf takes them; empty when malformed."""
    from pypdf.generic import DictionaryObject

    seen: set[int] = set()
    while isinstance(obj, DictionaryObject) and id(obj) not in seen and len(seen) < 1000:
        seen.add(id(obj))
        if "/Resources" in obj:
            return _dictionary(obj.get("/Resources"))
        obj = _resolved(obj.get("/Parent"))
    return DictionaryObject()


class _Work:
    """The parsing that reading a PDF's text asks of pypdf, added up page by page in about bytes parsed.

    Counted as pypdf does the work: for each page, and for each form XObject each time it is drawn (a form already
    being drawn is skipped, and past pypdf's cap of forms a page the rest are), the content stream (its bytes when
    pypdf parses it, the scan for text operators when it does not) and every font of the resources (a fixed cost,
    half its character map's bytes, twice its entries, its widths).
    What is counted is looked at once: each distinct stream decoded once (and parsed once to find the forms it
    draws, when its resources hold any), each distinct font's character map parsed once. `_TooMuchWork` as soon as
    the total passes `limit`, before the parsing that would pass it is done.
    """

    USE = 200  # a page or a drawn form, whatever its size (~0.3 ms of pypdf for a small form)
    FONT_USE = 50  # a font, besides its character map and widths (~35 µs for a standard one)
    CMAP_ENTRIES_MAX = 100_000  # pypdf's cap of a character map's entries, charged when one cannot be read

    def __init__(self, reader, limit: int):
        self.reader, self.limit, self.total = reader, limit, 0
        self.forms_per_page: int | None
        try:
            from pypdf import get_configuration

            self.forms_per_page = get_configuration().xform_maximum_invocations_per_extraction
        except (ImportError, AttributeError):  # an older pypdf draws every form: count them all
            self.forms_per_page = None
        self._forms_left = self.forms_per_page
        self.skips_drawings = _skips_drawings()
        self._streams: dict[int, list] = {}  # id -> [object, cost a use, holds "Do", names of what it draws]
        self._fonts: dict[int, tuple] = {}  # id -> (font, cost a use, error pypdf raises building it)
        self._draws_forms: dict[int, tuple] = {}  # id of an /XObject dictionary -> (it, holds a form)

    def add(self, units: int) -> None:
        self.total += units
        if self.total > self.limit:
            raise _TooMuchWork

    def page(self, page) -> None:
        self._forms_left = self.forms_per_page
        self._draw(page, "/Contents", set())

    def _draw(self, obj, content_key: str | None, drawing: set[int]) -> None:
        """A page (content_key "/Contents") or a form (None: the stream is its content), as pypdf's extract_text."""
        resources = _resources(obj)
        self.add(self.USE)
        fonts = _dictionary(resources.get("/Font"))
        for name in list(fonts):  # pypdf builds every font of the resources, drawn or not
            cost, error = self._font(_resolved(fonts.get(name)))
            self.add(cost)
            if error is not None:
                raise error
        if content_key is None:
            content = obj
        elif content_key in obj:
            content = _resolved(obj.get(content_key))
        else:
            return
        cost, names = self._stream(content, resources)
        self.add(cost)
        if not names:
            return
        xobjects = _dictionary(resources.get("/XObject"))
        for name in names:
            try:
                form = _resolved(xobjects.get(name))
                if form["/Subtype"] == "/Image":
                    continue
            except Exception:  # pypdf warns and goes on
                continue
            if id(form) in drawing:
                continue
            if self._forms_left is not None:
                if self._forms_left <= 0:
                    return
                self._forms_left -= 1
            drawing.add(id(form))
            try:
                self._draw(form, None, drawing)
            except _TooMuchWork:
                raise
            except Exception:  # pypdf warns and goes on
                pass
            finally:
                drawing.discard(id(form))

    def _stream(self, content, resources) -> tuple[int, list]:
        """What reading a content stream (or array of them) costs pypdf each time, and the names of the XObjects it
        draws when its resources hold a form.

        Parsed in full when it holds an operator that shows text or draws (Tj TJ ' " Do) or when pypdf parses
        every stream (before 7); else only scanned for those operators: a byte in 256, and a quarter for each
        T D ' " (pypdf looks at each in Python)."""
        from pypdf.generic import ContentStream

        known = self._streams.get(id(content))
        if known is None:
            try:
                data = ContentStream(content, self.reader, "bytes").get_data()
            except (AttributeError, KeyError):  # pypdf reads no content then
                data = b""
            parsed = any(operator in data for operator in _TEXT_OPERATORS) or not self.skips_drawings
            cost = len(data) if parsed else len(data) // 256 + sum(map(data.count, (b"T", b"D", b"'", b'"'))) // 4
            known = self._streams[id(content)] = [content, cost, b"Do" in data, None]
        _, cost, draws, names = known
        if names is None and draws and self._holds_forms(resources):
            self.add(cost)  # parsed here, once
            stream = ContentStream(content, self.reader, "bytes")
            names = known[3] = [operands[0] for operands, operator in stream.operations
                                if operator == b"Do" and operands]
        return cost, names or []

    def _holds_forms(self, resources) -> bool:
        xobjects = _dictionary(resources.get("/XObject"))
        if not xobjects:
            return False
        known = self._draws_forms.get(id(xobjects))
        if known is None:
            holds = False
            for name in list(xobjects):
                self.add(self.USE)
                try:
                    holds = _resolved(xobjects.get(name)).get("/Subtype") != "/Image"
                except Exception:
                    holds = True
                if holds:
                    break
            known = self._draws_forms[id(xobjects)] = (xobjects, holds)
        return known[1]

    def _font(self, font) -> tuple[int, Exception | None]:
        """What building the font costs pypdf each time, and the error it raises doing so (None if it does not)."""
        from pypdf.generic import DictionaryObject, StreamObject

        known = self._fonts.get(id(font))
        if known is None:
            cost, error, size = self.FONT_USE, None, 0
            if isinstance(font, DictionaryObject):
                try:
                    cost += self._font_tables(font)
                except Exception:  # pypdf meets the same and skips the font or the page
                    pass
                try:
                    cmap = _resolved(font.get("/ToUnicode"))
                    size = len(cmap.get_data()) // 2 if isinstance(cmap, StreamObject) else 0
                    self.add(self.FONT_USE + size)  # parsed here, once
                    entries = _character_map_entries(font)
                    self.add(2 * entries)
                    cost += size + 2 * entries
                    program = self._font_program(font)  # read then, without a map: hashed at each use
                    self.add(program // 16)
                    cost += program // 256
                except _TooMuchWork:
                    raise
                except Exception as exc:  # pypdf skips the font on these, its page on others
                    cost += size + 2 * self.CMAP_ENTRIES_MAX
                    error = None if isinstance(exc, (AttributeError, TypeError)) else exc
            known = self._fonts[id(font)] = (font, cost, error)
        return known[1], known[2]

    @staticmethod
    def _font_program(font) -> int:
        """The size of the embedded font program pypdf derives a Type 1 font's map from when it has no /ToUnicode
        (decoded by then, and cached with its map; pypdf hashes it each time to find that map)."""
        from pypdf.generic import StreamObject

        if "/ToUnicode" in font or font.get("/Subtype") != "/Type1":
            return 0
        descriptor = _dictionary(font.get("/FontDescriptor"))
        for key in ("/FontFile", "/FontFile3"):
            program = _resolved(descriptor.get(key))
            if isinstance(program, StreamObject) and (key == "/FontFile" or program.get("/Subtype") == "/Type1C"):
                return len(program.get_data())
        return 0

    @staticmethod
    def _font_tables(font) -> int:
        """The widths, encoding differences and glyph procedure names pypdf reads each time it builds the font."""
        from pypdf.generic import ArrayObject

        def length(value) -> int:
            value = _resolved(value)
            return len(value) if isinstance(value, (ArrayObject, dict)) else 0

        cost = length(font.get("/Widths")) + length(font.get("/CharProcs"))
        cost += length(_dictionary(font.get("/Encoding")).get("/Differences"))
        descendants = _resolved(font.get("/DescendantFonts"))
        for descendant in descendants if isinstance(descendants, ArrayObject) else []:
            widths = _resolved(_dictionary(descendant).get("/W"))
            widths = [_resolved(entry) for entry in widths] if isinstance(widths, ArrayObject) else []
            cost += len(widths)
            index = 0
            while index < len(widths) - 1:  # c [w1 w2 ...] or c_first c_last w, as pypdf reads them
                first, following = widths[index], widths[index + 1]
                if isinstance(following, ArrayObject):
                    cost, index = cost + len(following), index + 2
                elif isinstance(first, (int, float)) and isinstance(following, (int, float)):
                    cost, index = cost + min(max(int(following) - int(first) + 1, 0), 65_536), index + 3
                else:
                    index += 1
        return cost

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
    limit, seconds, started = MAX_PARSE_BYTES, MAX_PARSE_SECONDS, time.thread_time()

    def in_time(number: int) -> None:
        if time.thread_time() - started > seconds:
            raise ExtractionError(f"the PDF takes too much work to read: {seconds:,} seconds of processing were not "
                                  f"enough to read its text (by page {number} of {len(pages):,}): split it or "
                                  "print it to a new PDF")

    work = _Work(reader, limit)
    for number, page in enumerate(pages, start=1):
        in_time(number)
        try:
            work.page(page)
        except _TooMuchWork:
            raise ExtractionError(f"the PDF takes too much work to read: by page {number} of {len(pages):,} its "
                                  f"text needs more than {limit:,} bytes of content streams and fonts parsed, the "
                                  "limit (content that pages share is parsed again for each): split it or print "
                                  "it to a new PDF") from None
        except Exception as exc:
            raise ExtractionError(f"page {number} of the PDF cannot be read ({exc or type(exc).__name__})") from None
    paragraphs: list[list[str]] = []
    characters = 0
    for number, page in enumerate(pages, start=1):
        in_time(number)
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
