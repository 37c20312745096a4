"""The document-ingestion bench (bench/documents.py): its answer-coverage scoring, then the whole run on a tiny sample."""
import pytest

from bench import documents


def chunked(document, size, overlap):
    from ingest.chunking import chunk

    result = documents.extracted(document)
    chunks = chunk(result, size=size, overlap=overlap, fallback_title=document.title)
    return chunks, documents.spans(chunks, document, [tuple(b.headings) for b in result.blocks])


SENTENCES = [f"Sentence number {n} says something about topic {n} at some length." for n in range(12)]
DOC = documents.Document(uri="doc.md", title="Doc",
                         sections=[("Intro", [" ".join(SENTENCES[:6])]), ("Body", [" ".join(SENTENCES[6:])])])


def test_the_spans_of_the_chunks_cover_each_block_and_overlap_only_with_an_overlap():
    chunks, spans = chunked(DOC, 200, 0)
    assert len(chunks) == 4 and all(spans)
    for block, text in enumerate(DOC.blocks):
        parts = [(s, e) for ranges in spans for b, s, e in ranges if b == block]
        assert sum(e - s for s, e in parts) == documents._covered(parts)  # no character in two chunks
        assert documents._covered(parts) >= len(text) - 3  # all but the spaces where the block was cut
    _, overlapping = chunked(DOC, 200, 80)
    parts = [(s, e) for ranges in overlapping for b, s, e in ranges if b == 0]
    assert sum(e - s for s, e in parts) > documents._covered(parts)


def test_recall_is_the_covered_share_of_the_answer_and_ndcg_rewards_covering_it_early():
    _, spans = chunked(DOC, 200, 0)  # block 0 (six sentences) in two chunks
    block = [ranges for ranges in spans if ranges[0][0] == 0]
    passage = documents.Question("q", "?", "doc.md", 0, 0, len(DOC.blocks[0]))
    sentence = documents.Question("s", "?", "doc.md", 0, 0, len(SENTENCES[0]))
    other = spans[-1]
    assert documents.score(block, spans, passage) == {"recall@1": pytest.approx(0.5, abs=0.01),
                                                       "recall@5": pytest.approx(1.0), "hit@1": 1.0, "ndcg@10": pytest.approx(1.0)}
    assert documents.score([other, block[0]], spans, sentence) == {"recall@1": 0.0, "recall@5": 1.0, "hit@1": 0.0,
                                                                   "ndcg@10": pytest.approx(1 / 1.585, abs=0.001)}
    assert documents.score([other], spans, sentence)["ndcg@10"] == 0.0


@pytest.mark.django_db
def test_the_bench_scores_each_configuration_on_both_sets_and_times_each_stage(settings, tmp_path, capsys):
    from knowledge.models import Knowledge

    settings.VAR_DIR = tmp_path / "var"
    report = documents.main(["--sizes", "400,1200", "--overlaps", "150", "--cmrc-documents", "1", "--xquad-documents", "1",
                             "--max-queries", "6", "--throughput-documents", "1", "--embed-chunks", "2",
                             "--bulk-items", "10", "--min-seconds", "0.05"], setup=False)

    rows = {(row["dataset"], row["size"], row["overlap"]): row for row in report["chunking"]}
    assert set(rows) == {(name, size, 150) for name in documents.DATASETS for size in (400, 1200)}
    for (name, size, overlap), row in rows.items():
        assert row["unplaced"] == 0 and 0 < row["mean_chars"] <= size + overlap
        assert Knowledge.objects.filter(scopes__contains=[f"bench:documents:{name}:{size}-{overlap}"]).count() == row["chunks"]
        assert row["development"]["queries"] + row["held-out"]["queries"] == report["samples"][name]["questions"] > 0
        for half in ("development", "held-out"):
            m = row[half]
            assert 0 <= m["recall@1"] <= m["hit@1"] <= 1 and m["recall@1"] <= m["recall@5"] <= 1 and 0 <= m["ndcg@10"] <= 1
    for name in documents.DATASETS:
        assert rows[(name, 400, 150)]["chunks"] > rows[(name, 1200, 150)]["chunks"]
    assert (report["recommended"]["size"], report["recommended"]["overlap"]) in {(400, 150), (1200, 150)}

    speeds = report["throughput"]
    assert {(row["kind"], row["language"]) for row in speeds["extract"]} == {
        *((kind, "en") for kind in ("markdown", "text", "html", "pdf", "docx")), ("markdown", "zh")}
    assert all(row["kb_per_s"] > 0 and row["text_kb_per_s"] > 0 for row in speeds["extract"])
    assert next(row for row in speeds["extract"] if row["kind"] == "pdf")["pages_per_s"] > 0
    assert all(row["kb_per_s"] > 0 and row["chunks"] > 0 for row in speeds["chunk"])
    assert [row["language"] for row in speeds["embedding"]] == ["en", "zh"]
    assert all(row["chunks_per_s"] > 0 and row["kb_per_s"] > 0 for row in speeds["embedding"])
    assert speeds["bulk"]["items"] == 10 and speeds["bulk"]["items_per_s"] > 0
    assert not Knowledge.objects.filter(scopes__contains=[documents.THROUGHPUT_SCOPE]).exists()

    printed = capsys.readouterr().out
    assert "| dataset | size / overlap |" in printed and "Chunk defaults: best on development" in printed
