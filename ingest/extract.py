"""Text out of documents, the public entry point: `kind_of` names the kind (Markdown, plain text, HTML, PDF
or DOCX) from a file name or content type, and `extract` turns the bytes into an `Extracted` (a title and
`Block`s: paragraphs, lists, code, tables, each with its enclosing headings) by dispatching to the kind's
reader in `ingest.readers`. Pure functions, no database and no network; `ingest.chunking` turns the blocks
into chunks.
"""
from __future__ import annotations

from django.utils.translation import gettext as _
from ingest.readers import docx, html, markdown, pdf, text
from ingest.readers.base import Block, Extracted, ExtractionError, UnsupportedDocument
from ingest.readers.text import decode_text

__all__ = [
    "CONTENT_TYPES", "EXTENSIONS", "KINDS", "SUPPORTED", "Block", "Extracted", "ExtractionError",
    "UnsupportedDocument", "decode_text", "extract", "kind_of",
]

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
    given = [_("file name %(name)r") % {"name": filename} if filename else "",
             _("content type %(type)r") % {"type": content_type} if content_type else ""]
    described = _(" and ").join(part for part in given if part) or _("no file name or content type")
    raise UnsupportedDocument(_("unsupported document type (%(described)s): upload %(supported)s")
                              % {"described": described, "supported": SUPPORTED})


def extract(data: bytes, kind: str) -> Extracted:
    """The title and blocks of `data`, read as `kind`; ExtractionError if it cannot be read."""
    readers = {"markdown": markdown.read, "text": text.read, "html": html.read, "pdf": pdf.read, "docx": docx.read}
    if kind not in readers:
        raise UnsupportedDocument(_("unknown document kind %(kind)r: expected one of %(kinds)s")
                                  % {"kind": kind, "kinds": ", ".join(KINDS)})
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"extract() needs bytes, not {type(data).__name__}")
    try:
        return readers[kind](bytes(data))
    except RecursionError:
        raise ExtractionError(_("the %(kind)s document nests too deeply to be read") % {"kind": kind}) from None
