"""The shared vocabulary of every reader: the `Block`s and `Extracted` result a reader returns, and the errors
(`UnsupportedDocument`, `ExtractionError`) that `ingest.extract` and the readers raise; `ingest.extract`
re-exports them, so other modules import them from there.
"""
from __future__ import annotations

from dataclasses import dataclass


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
