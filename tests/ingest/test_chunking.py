"""ingest.chunking: sections, size bounds, overlap, determinism and validation, on extracted documents."""
import pytest

from ingest.chunking import DEFAULT_OVERLAP, DEFAULT_SIZE, chunk, split_sentences
from ingest.extract import Block, Extracted, extract


def sentences(label: str, count: int) -> str:
    return " ".join(f"{label} sentence {n} explains one more detail of the procedure." for n in range(count))


def runbook(*, rollback_text: str = "Redeploy the previous tag.") -> Extracted:
    source = f"""# Deploy runbook

Short intro.

## Steps

{sentences("Steps", 40)}

- build the image
- push it

```bash
# not a heading

make deploy
```

## Monitoring

{sentences("Monitoring", 30)}

## Empty section

## Rollback

{rollback_text}
"""
    return extract(source.encode(), "markdown")


def comparable(chunks):
    return [(c.title, c.headings, c.text) for c in chunks]


def repeated(previous: str, current: str) -> str:
    """The longest run of whole last sentences of `previous` that `current` starts with ("" if none)."""
    found, tail = "", ""
    for sentence in reversed(split_sentences(previous)):
        tail = sentence + tail
        if current.startswith(tail.strip()):
            found = tail.strip()
    return found


def test_chunks_follow_sections_and_never_span_two():
    chunks = chunk(runbook(), size=500, overlap=100)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    headings = [c.headings for c in chunks]
    assert headings[0] == ("Deploy runbook",)
    # sections appear in document order, each in one contiguous run of chunks
    runs = [h for i, h in enumerate(headings) if i == 0 or h != headings[i - 1]]
    assert runs == [("Deploy runbook",), ("Deploy runbook", "Steps"), ("Deploy runbook", "Monitoring"),
                    ("Deploy runbook", "Rollback")]
    for c in chunks:
        assert c.title == " > ".join(c.headings)
        assert ("Steps sentence" in c.text) == (c.headings[-1] == "Steps")
        assert ("Monitoring sentence" in c.text) == (c.headings[-1] == "Monitoring")


def test_small_sections_are_their_own_chunk_and_a_heading_without_blocks_has_none():
    chunks = chunk(runbook(), size=500, overlap=100)
    assert comparable(chunks[:1]) == [("Deploy runbook", ("Deploy runbook",), "Short intro.")]
    assert comparable(chunks[-1:]) == [("Deploy runbook > Rollback", ("Deploy runbook", "Rollback"),
                                        "Redeploy the previous tag.")]
    assert not any("Empty section" in c.title for c in chunks)


@pytest.mark.parametrize("size, overlap", [(200, 0), (200, 99), (500, 100), (DEFAULT_SIZE, DEFAULT_OVERLAP)])
def test_every_chunk_is_at_most_size_plus_overlap(size, overlap):
    document = runbook()
    document.blocks.append(Block("x" * 2500, ("One long word",)))
    document.blocks.append(Block("```\n" + "\n".join(f"line {n} " * 8 for n in range(60)) + "\n```", ("Code",)))
    chunks = chunk(document, size=size, overlap=overlap)
    assert all(0 < len(c.text) <= size + overlap for c in chunks)
    if overlap == 0:
        assert all(len(c.text) <= size for c in chunks)


def test_blocks_are_packed_whole_and_a_section_fills_chunks_in_order():
    blocks = [Block(f"Paragraph {n}" + " word" * 30, ("Section",)) for n in range(10)]
    chunks = chunk(Extracted("Doc", blocks), size=500, overlap=0)
    assert len(chunks) > 1
    assert "\n\n".join(c.text for c in chunks) == "\n\n".join(b.text for b in blocks)
    for c in chunks:
        assert all(part.startswith("Paragraph ") for part in c.text.split("\n\n"))


def test_a_long_paragraph_is_cut_at_sentence_ends_with_overlap_inside_the_section():
    text = sentences("Steps", 40)
    chunks = chunk(Extracted("Doc", [Block(text, ("Steps",))]), size=400, overlap=120)
    assert len(chunks) > 2
    for previous, current in zip(chunks, chunks[1:], strict=False):
        overlap = repeated(previous.text, current.text)  # whole sentences of the previous chunk
        assert 0 < len(overlap) <= 120
        assert current.text.startswith("Steps sentence") and current.text.endswith("procedure.")
    without = chunk(Extracted("Doc", [Block(text, ("Steps",))]), size=400, overlap=0)
    assert " ".join(c.text for c in without) == text  # overlap 0: every sentence exactly once


def test_no_overlap_across_sections():
    chunks = chunk(runbook(), size=500, overlap=100)
    monitoring = [c for c in chunks if c.headings[-1] == "Monitoring"]
    assert monitoring[0].text.startswith("Monitoring sentence 0 ")
    assert repeated(monitoring[0].text, monitoring[1].text)  # within the section there is overlap
    rollback = [c for c in chunks if c.headings[-1] == "Rollback"]
    assert rollback[0].text == "Redeploy the previous tag."


def test_a_sentence_longer_than_size_is_hard_split():
    word = "a" * 450
    chunks = chunk(Extracted("", [Block(word, ())]), size=200, overlap=50, fallback_title="notes.txt")
    assert [c.text for c in chunks] == ["a" * 200, "a" * 200, "a" * 50]
    assert all(c.title == "notes.txt" for c in chunks)


def test_a_long_code_block_is_split_only_between_lines_and_each_piece_stays_fenced():
    lines = [f"echo 'step {n}. Then the next.'" for n in range(60)]
    code = "```bash\n" + "\n".join(lines) + "\n```"
    chunks = chunk(Extracted("Doc", [Block(code, ("Code",))]), size=300, overlap=100)
    assert len(chunks) > 3
    seen = []
    for c in chunks:
        assert len(c.text) <= 300
        first, *body, last = c.text.split("\n")
        assert (first, last) == ("```bash", "```")
        seen.extend(body)
    assert seen == lines  # every line whole, in order, none repeated as overlap


def test_chinese_sentences_end_at_full_stops():
    text = "".join(f"第{n}步：检查服务状态并记录结果。" for n in range(40))
    chunks = chunk(Extracted("部署手册", [Block(text, ("部署手册", "部署"))]), size=200, overlap=40)
    assert len(chunks) > 2
    assert all(c.text.endswith("。") for c in chunks)
    assert all(c.text.startswith("第") for c in chunks)
    assert all(c.title == "部署手册 > 部署" for c in chunks)


def test_titles_fall_back_to_the_document_title_then_the_given_fallback():
    untitled_blocks = [Block("Loose text.", ())]
    assert chunk(Extracted("Doc title", untitled_blocks))[0].title == "Doc title"
    assert chunk(Extracted("", untitled_blocks), fallback_title="https://example.com/page")[0].title \
        == "https://example.com/page"


def test_chunking_is_deterministic():
    assert comparable(chunk(runbook(), size=400, overlap=80)) == comparable(chunk(runbook(), size=400, overlap=80))


def test_editing_one_section_leaves_the_other_sections_chunks_unchanged():
    before = chunk(runbook(), size=400, overlap=80)
    after = chunk(runbook(rollback_text=sentences("Rollback", 12)), size=400, overlap=80)
    assert [c for c in comparable(after) if c[1][-1] != "Rollback"] == \
        [c for c in comparable(before) if c[1][-1] != "Rollback"]
    assert [c for c in comparable(after) if c[1][-1] == "Rollback"] != \
        [c for c in comparable(before) if c[1][-1] == "Rollback"]


def test_an_empty_document_has_no_chunks():
    assert chunk(Extracted("Title", [])) == []


@pytest.mark.parametrize("size", [199, 0, -5, 1200.0, True])
def test_a_too_small_or_non_integer_size_is_refused(size):
    with pytest.raises(ValueError, match="^size must be"):
        chunk(Extracted("", []), size=size, overlap=0)


@pytest.mark.parametrize("size, overlap", [(1200, 600), (1200, -1), (200, 100), (1200, 1.5)])
def test_an_overlap_of_half_the_size_or_more_or_negative_is_refused(size, overlap):
    with pytest.raises(ValueError, match="^overlap must be"):
        chunk(Extracted("", []), size=size, overlap=overlap)


def test_split_sentences_keeps_separators_so_pieces_rejoin():
    text = "One. Two?  \"Three!\" Four 3.14 stays.\n- item\n中文。句子！"
    pieces = split_sentences(text)
    assert "".join(pieces) == text
    assert pieces == ["One. ", "Two?  ", "\"Three!\" ", "Four 3.14 stays.\n", "- item\n", "中文。", "句子！"]
