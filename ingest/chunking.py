"""Chunks out of an extracted document: deterministic, section by section, bounded in size.

Owns how `Extracted` blocks become `Chunk`s. A section is a run of blocks with the same headings; a chunk
never spans two, so editing one section leaves every other section's chunks as they were (only the
`index` of later chunks can shift). Within a section whole blocks are packed greedily up to `size`
characters; a longer block is cut at sentence ends (English . ! ? before a space or line break, Chinese
。！？；, and line breaks), a longer sentence at `size`, and a fenced code block only between lines (each
piece fenced again, so it stays valid code). When a section continues into another chunk, that chunk
starts with the last whole sentences of the previous one, within `overlap` characters (code and cut
sentences are not repeated). Every chunk is at most `size + overlap` characters.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import groupby

from django.utils.translation import gettext as _

from ingest.extract import Block, Extracted

DEFAULT_SIZE = 1200  # characters
DEFAULT_OVERLAP = 150  # characters
MIN_SIZE = 200

# A sentence ends after . ! ? (and closing quotes or brackets) before whitespace, after 。！？； (and closers),
# or at a line break; the separator stays with the sentence before it, so the pieces concatenate back.
# Each alternative starts only at the first mark of a run (the lookbehinds) and never gives back what it took
# (possessive quantifiers), so a long run of dots or blanks costs linear time, not quadratic.
_SENTENCE_END = re.compile(
    r"""(?<![.!?])[.!?]++["'”’)\]]*+(?:[ \t]*+\n++|[ \t]++)|(?<![。！？；])[。！？；]++[”’」』）)]*+[ \t]*+\n*+|(?<!\n)\n++""")
_FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*$")


@dataclass(frozen=True)
class Chunk:
    index: int  # 0-based position in the document
    title: str  # " > ".join(headings), else the document title, else the fallback
    text: str
    headings: tuple[str, ...]


@dataclass(frozen=True)
class _Piece:
    """A block, or a part of one; pieces of the same block join without a separator."""

    text: str
    block: tuple[int, int]  # (block number, part number for separately fenced code pieces)
    sentences: bool  # whole sentences, which may be repeated as overlap


class TooManyChunks(ValueError):
    """A document that would become more items than one document may (`KNOWHUB_DOCUMENT_MAX_ITEMS`)."""


def chunk(extracted: Extracted, *, size: int = DEFAULT_SIZE, overlap: int = DEFAULT_OVERLAP,
          fallback_title: str = "", max_chunks: int | None = None) -> list[Chunk]:
    """The document's chunks, in order; a section with no text has none. TooManyChunks as soon as there would be
    more than `max_chunks` (before anything is stored: one file of 40,000 headings became 40,000 items whose
    embeddings held up every other job)."""
    check_sizes(size, overlap)
    blocks = [Block(block.text.strip(), tuple(block.headings)) for block in extracted.blocks if block.text.strip()]
    chunks: list[Chunk] = []
    for headings, section in groupby(enumerate(blocks), key=lambda numbered: numbered[1].headings):
        title = " > ".join(headings) or extracted.title.strip() or fallback_title
        pieces = [piece for number, block in section for piece in _pieces(block.text, number, size)]
        previous: list[_Piece] = []
        for body in _pack(pieces, size):
            text = _join(_overlap(previous, body, overlap) + body) if previous and overlap else _join(body)
            if max_chunks is not None and len(chunks) >= max_chunks:
                raise TooManyChunks(_("the document would become more than %(most)s items (KNOWHUB_DOCUMENT_MAX_ITEMS): "
                                      "split it or give a larger chunk_size; nothing was stored")
                                    % {"most": f"{max_chunks:,}"})
            chunks.append(Chunk(index=len(chunks), title=title, text=text, headings=headings))
            previous = body
    return chunks


def check_sizes(size: int, overlap: int) -> None:
    """ValueError, starting with the parameter's name, unless `size` and `overlap` can cut chunks."""
    if isinstance(size, bool) or not isinstance(size, int) or size < MIN_SIZE:
        raise ValueError(f"size must be an integer of at least {MIN_SIZE} characters, got {size!r}")
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < size // 2:
        raise ValueError(f"overlap must be an integer from 0 to less than half the size ({size // 2}), got {overlap!r}")


def split_sentences(text: str) -> list[str]:
    """`text` cut after each sentence end; the pieces (separators included) concatenate back to `text`."""
    pieces, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        if match.end() > start:
            pieces.append(text[start:match.end()])
            start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _pieces(text: str, number: int, size: int) -> list[_Piece]:
    if len(text) <= size:
        return [_Piece(text, (number, 0), sentences=not _is_code(text))]
    if _is_code(text):
        return [_Piece(code, (number, part), sentences=False) for part, code in enumerate(_code_pieces(text, size))]
    pieces = []
    for sentence in split_sentences(text):
        if len(sentence.rstrip()) <= size:
            pieces.append(_Piece(sentence, (number, 0), sentences=True))
        else:
            pieces.extend(_Piece(sentence[at:at + size], (number, 0), sentences=False)
                          for at in range(0, len(sentence), size))
    return pieces


def _is_code(text: str) -> bool:
    """A fenced code block, as `extract` makes them: an opening fence line through a matching closing one."""
    lines = text.split("\n")
    opener = _FENCE.match(lines[0])
    return len(lines) >= 2 and opener is not None and lines[-1].strip() == opener.group(1)


def _code_pieces(text: str, size: int) -> list[str]:
    """A long fenced code block as consecutive fenced pieces of at most `size` characters, cut between lines."""
    lines = text.split("\n")
    opener, body, closer = lines[0], lines[1:-1], lines[-1]
    budget = size - len(opener) - len(closer) - 2
    if budget < MIN_SIZE // 4:  # an absurdly long info string: cut the block as plain lines
        opener = closer = ""
        body, budget = lines, size
    cut = [line[at:at + budget] for line in body for at in range(0, max(len(line), 1), budget)]
    groups: list[list[str]] = [[]]
    length = 0
    for line in cut:
        if groups[-1] and length + 1 + len(line) > budget:
            groups.append([])
        length = len(line) if not groups[-1] else length + 1 + len(line)
        groups[-1].append(line)
    return ["\n".join(part for part in (opener, "\n".join(group), closer) if part) for group in groups]


def _join(pieces: list[_Piece]) -> str:
    text, block = "", None
    for piece in pieces:
        if block is not None and piece.block != block:
            text = text.rstrip() + "\n\n"
        text += piece.text
        block = piece.block
    return text.strip()


def _pack(pieces: list[_Piece], size: int) -> list[list[_Piece]]:
    """Greedy: each chunk takes pieces while its text stays within `size`."""
    chunks: list[list[_Piece]] = []
    text = ""
    for piece in pieces:
        if chunks:
            joined = text + piece.text if piece.block == chunks[-1][-1].block else f"{text.rstrip()}\n\n{piece.text}"
            if len(joined.strip()) <= size:
                chunks[-1].append(piece)
                text = joined
                continue
        chunks.append([piece])
        text = piece.text
    return chunks


def _overlap(previous: list[_Piece], body: list[_Piece], budget: int) -> list[_Piece]:
    """The last whole sentences of `previous` that add at most `budget` characters in front of `body`."""
    base = len(_join(body))
    chosen: list[_Piece] = []
    for piece in reversed(previous):
        if not piece.sentences:
            break
        for sentence in reversed(split_sentences(piece.text)):
            candidate = [_Piece(sentence, piece.block, sentences=True), *chosen]
            if len(_join(candidate + body)) - base > budget:
                return chosen
            chosen = candidate
    return chosen
