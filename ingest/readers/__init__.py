"""The readers behind `ingest.extract`, one module per kind, each `read(data: bytes) -> Extracted`.

Conventions shared by every kind: text is whitespace-normalised (runs of spaces and line breaks become one
space, a line break between two CJK characters disappears), except lists and tables (one line per item or
row) and code (kept verbatim, fenced with ``` so `chunking` can tell it is code; an HTML <pre> is fenced
too). NUL characters are removed and lone surrogates replaced, and a block never has empty text.
"""
