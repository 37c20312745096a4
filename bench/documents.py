"""Document ingestion: the chunk-size default measured on public data, and the throughput of each stage.

    .venv/bin/python -m bench.documents [--sizes 400,800,1200,2000] [--overlaps 0,150] [--max-queries N]

1. Chunk size and overlap. Passages of two public sets (../shared/data, read in place) are put together into
   Markdown documents, each document is extracted (`ingest.extract`) and chunked (`ingest.chunking.chunk`)
   with every (size, overlap), and the chunks are stored as the worker stores a document's chunks (task =
   the chunk's title, content = its text, type `definition`; vectors computed as `indexing.embed_items`
   does, cached under var/bench-cache) in a scope of their own per configuration on the bench database
   (`knowhub_bench` on the embedded server, or BENCH_DATABASE_URL). Each question is searched through
   `knowledge.search.engine.search` (hybrid, top 10, as bench/runner.py does).

   - CMRC 2018 (Chinese): the questions' passages in id order, four to a document: `# 维基百科摘录 N`,
     each passage a `## <its article title>` section (short named sections, 276-980 characters).
   - XQuAD-R, English side: one document per article, `# Wikipedia article NN`, its paragraphs as
     paragraphs of one section (long unsectioned text, 2-10k characters per article, as a PDF or a
     plain text file gives).

   The answer of a question is a character range of one block: CMRC's answer spans are not in the
   dataset, so the whole passage; XQuAD-R's is the sentence holding the answer. A chunk covers the part
   of that range its text holds. recall@k is the share of the answer covered by the top k chunks (for a
   passage: the chance that a span placed anywhere in it is in them); nDCG@10 gains at each rank what the
   chunk adds to the coverage above it, against the fewest chunks that cover it, best first; hit@1 counts
   a question when any part of its answer is in the top chunk (for CMRC's passages split in several
   chunks, recall@1 and hit@1 bound the chance that the top chunk holds the answer's span).

   Questions are split by bench/runner.py's halves over the whole query file (even positions:
   development, odd: held-out): the recommended configuration is the best mean nDCG@10 over both sets on
   the development half, and the held-out half is only scored.

2. Throughput, per stage: documents in each format generated from the same text (Markdown, text and HTML
   written here, PDF with reportlab, DOCX with python-docx), `extract` (file KB/s, extracted text KB/s,
   pages/s for PDF), `chunk` at the default size and overlap (text KB/s), the embedding of chunks as the
   worker does it (chunks/s, KB/s; uncached) and `knowledge_bulk_create` with precomputed vectors
   (items/s). KB is 1,000 bytes (UTF-8).
"""
import argparse
import hashlib
import io
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")

import numpy as np

DATABASE = "knowhub_bench"
CMRC, XQUAD = "cmrc2018-dev-zh", "xquad-r-en-zh"
DATASETS = (CMRC, XQUAD)
PASSAGES_PER_DOCUMENT = 4  # CMRC
SEED = 20261127
TOP_K = 10
METRICS = ("recall@1", "recall@5", "hit@1", "ndcg@10")
BULK_BATCH = 500
SCOPE_PREFIX = "bench:documents"
THROUGHPUT_SCOPE = f"{SCOPE_PREFIX}:throughput"
TYPES = ["definition"]  # ingest.documents.DEFAULT_TYPES


# --- The documents and their questions ---------------------------------------------------------------------

@dataclass
class Document:
    uri: str
    title: str
    sections: list[tuple[str, list[str]]]  # (heading or "", paragraphs); "" = the paragraphs go under the title
    blocks: list[str] = field(default_factory=list)  # the paragraphs in order, as `extract` gives them back

    def markdown(self) -> str:
        lines = [f"# {self.title}", ""]
        for heading, paragraphs in self.sections:
            if heading:
                lines += [f"## {heading}", ""]
            for paragraph in paragraphs:
                lines += [paragraph, ""]
        return "\n".join(lines)

    @property
    def paragraphs(self) -> list[str]:
        return [p for _, paragraphs in self.sections for p in paragraphs]


@dataclass
class Question:
    id: str
    text: str
    uri: str
    block: int  # the answer's block in the document
    start: int  # the answer's range in that block's text
    end: int


@dataclass
class Sample:
    name: str
    documents: list[Document]
    questions: list[Question]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _number(passage_id: str) -> int:
    return int(passage_id.rsplit("_", 1)[-1])


def cmrc_sample(documents: int, rng: np.random.Generator) -> Sample:
    """`documents` documents of four consecutive question-bearing CMRC passages each, chosen at random."""
    from bench import datasets

    data = datasets.load(CMRC)
    asked = sorted({doc for qid in data.queries for doc in data.qrels[qid]}, key=_number)
    groups = [asked[at : at + PASSAGES_PER_DOCUMENT] for at in range(0, len(asked), PASSAGES_PER_DOCUMENT)]
    chosen = sorted(rng.choice(len(groups), size=min(documents, len(groups)), replace=False))
    docs, where = [], {}
    for n in chosen:
        sections = []
        for passage in groups[n]:
            where[passage] = (f"cmrc-{n:03d}.md", len(sections))
            sections.append((_flat(data.corpus[passage]["title"]) or "无标题", [_flat(data.corpus[passage]["text"])]))
        docs.append(Document(uri=f"cmrc-{n:03d}.md", title=f"维基百科摘录 {n}", sections=sections))
    questions = []
    for qid, text in data.queries.items():
        (passage,) = data.qrels[qid]
        if passage in where:
            uri, block = where[passage]
            questions.append(Question(qid, text, uri, block, 0, len(_flat(data.corpus[passage]["text"]))))
    return Sample(CMRC, docs, questions)


def xquad_sample(documents: int, rng: np.random.Generator) -> Sample:
    """`documents` English XQuAD-R articles chosen at random, each one document; the English questions on them."""
    from bench import datasets

    data = datasets.load(XQUAD)
    articles: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for doc_id in data.corpus:
        language, article, paragraph, sentence = doc_id.split("-")
        if language == "en":
            articles.setdefault(article, {}).setdefault(paragraph, []).append((sentence, doc_id))
    names = sorted(articles)
    chosen = [names[n] for n in sorted(rng.choice(len(names), size=min(documents, len(names)), replace=False))]
    docs, where = [], {}
    for article in chosen:
        uri = f"xquad-{article}.md"
        paragraphs = []
        for paragraph in sorted(articles[article]):
            text = ""
            for _, doc_id in sorted(articles[article][paragraph]):
                sentence = _flat(data.corpus[doc_id]["text"])
                text += " " if text else ""
                where[doc_id] = (uri, len(paragraphs), len(text), len(text) + len(sentence))
                text += sentence
            paragraphs.append(text)
        docs.append(Document(uri=uri, title=f"Wikipedia article {article[1:]}", sections=[("", paragraphs)]))
    questions = []
    for qid, text in data.queries.items():
        answers = [doc for doc in data.qrels[qid] if doc.startswith("en-")]
        if qid.startswith("en-") and answers and answers[0] in where:
            questions.append(Question(qid, text, *where[answers[0]]))
    return Sample(XQUAD, docs, questions)


def sample(name: str, documents: int) -> Sample:
    rng = np.random.default_rng(SEED)
    return (cmrc_sample if name == CMRC else xquad_sample)(documents, rng)


def extracted(document: Document):
    """The document's Markdown through `extract`; its blocks must be its paragraphs, in order."""
    from ingest.extract import extract

    result = extract(document.markdown().encode(), "markdown")
    document.blocks = [block.text for block in result.blocks]
    if document.blocks != document.paragraphs:
        raise ValueError(f"{document.uri}: the extracted blocks are not the document's paragraphs")
    return result


def halves(name: str) -> dict[str, str]:
    """Question id -> "development" or "held-out", by bench/runner.py's halves over the whole query file."""
    from bench import datasets
    from bench.runner import development

    queries = datasets.load(name).queries
    tuned = {qid for qid, _ in development(queries)}
    return {qid: "development" if qid in tuned else "held-out" for qid in queries}


# --- Chunks, their place in the document, and the coverage of an answer -------------------------------------

def spans(chunks, document: Document, headings_of: list[tuple]) -> list[list[tuple[int, int, int]]]:
    """Per chunk, the (block, start, end) ranges of the document's blocks its text holds.

    A chunk is its section's pieces joined by a blank line between blocks (`chunking._join`); each piece of
    one block is a contiguous part of it.
    """
    out, cursor = [], 0
    for chunk in chunks:
        section = [b for b, headings in enumerate(headings_of) if headings == tuple(chunk.headings)]
        ranges = []
        for fragment in chunk.text.split("\n\n"):
            fragment = fragment.strip()
            if not fragment:
                continue
            for b in sorted(section, key=lambda b: (b < cursor, b)):
                at = document.blocks[b].find(fragment)
                if at >= 0:
                    ranges.append((b, at, at + len(fragment)))
                    cursor = b
                    break
        out.append(ranges)
    return out


def _covered(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def _parts(ranges, question: Question) -> list[tuple[int, int]]:
    return [(max(s, question.start), min(e, question.end)) for b, s, e in ranges
            if b == question.block and min(e, question.end) > max(s, question.start)]


def coverable(candidates: list[list[tuple[int, int, int]]], question: Question) -> int:
    """How many of the answer's characters some chunk holds (all but the spaces where a block was cut)."""
    return _covered([part for ranges in candidates for part in _parts(ranges, question)])


def gains(ranked: list[list[tuple[int, int, int]]], question: Question, length: int) -> list[float]:
    """What each ranked chunk adds to the covered share of the answer (`length` coverable characters)."""
    held, out, covered = [], [], 0
    for ranges in ranked:
        held += _parts(ranges, question)
        now = _covered(held)
        out.append((now - covered) / length)
        covered = now
    return out


def ideal_gains(candidates: list[list[tuple[int, int, int]]], question: Question, length: int, k: int = TOP_K) -> list[float]:
    """The fewest chunks that cover the answer, greedily, best first."""
    held, out, covered = [], [], 0
    pool = [_parts(ranges, question) for ranges in candidates]
    pool = [parts for parts in pool if parts]
    while pool and len(out) < k:
        best = max(pool, key=lambda parts: _covered(held + parts))
        now = _covered(held + best)
        if now <= covered:
            break
        held += best
        out.append((now - covered) / length)
        covered = now
        pool.remove(best)
    return out


def _dcg(values: list[float]) -> float:
    return sum(g / np.log2(i + 2) for i, g in enumerate(values[:TOP_K]))


def score(ranked, candidates, question: Question) -> dict:
    """recall@1, recall@5, hit@5 and nDCG@10 of a ranking of chunks (their spans) for one question."""
    length = coverable(candidates, question)
    if not length:
        raise ValueError(f"{question.id}: no chunk holds the answer")
    got = gains(ranked, question, length)
    ideal = _dcg(ideal_gains(candidates, question, length))
    return {"recall@1": sum(got[:1]), "recall@5": sum(got[:5]), "hit@1": float(any(g > 0 for g in got[:1])),
            "ndcg@10": _dcg(got) / ideal if ideal else 0.0}


# --- Storing and searching a configuration ------------------------------------------------------------------

def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _entry(chunk, document: Document, scope: str, content_hash: str) -> dict:
    """The item the worker makes of a chunk (ingest.chunks.apply_chunks)."""
    return {"task": chunk.title[:10_000], "content": chunk.text, "types": TYPES, "scopes": [scope],
            "source": {"name": document.title, "category": "document",
                       "document": {"kind": "markdown", "uri": document.uri, "content_hash": content_hash,
                                    "chunk": chunk.index, "chunk_hash": _sha(chunk.text)}}}


def vectors_for(texts: list[str], embedder, *, cache: str | None) -> np.ndarray:
    """One vector per text as `indexing.embed_items` makes it (pieces of ≤ 2,000 characters, pooled);
    with `cache`, pieces are cached under var/bench-cache (bench/embed_cache.py) by their hash."""
    from django.conf import settings

    from bench.embed_cache import cached_matrix
    from knowledge.search.indexing import EMBED_BATCH, _pooled, embedding_chunks

    pieces = [embedding_chunks(text) for text in texts]
    flat = list(dict.fromkeys(p for ps in pieces for p in ps))
    if cache:
        ids = [_sha(p)[:24] for p in flat]
        matrix = cached_matrix(cache_dir=settings.VAR_DIR / "bench-cache", dataset=cache, embedder=embedder, ids=ids, texts=flat)
    else:
        matrix = np.vstack([embedder.embed_passages(flat[at : at + EMBED_BATCH]) for at in range(0, len(flat), EMBED_BATCH)])
    row = {p: i for i, p in enumerate(flat)}
    return np.stack([matrix[row[ps[0]]] if len(ps) == 1 else np.asarray(_pooled(embedder, [matrix[row[p]] for p in ps]))
                     for ps in pieces])


def store(scope: str, entries: list[dict], vectors, embedder) -> dict[str, tuple[str, int]]:
    """The entries in `scope` (reused when the scope already holds exactly them); knowledge id -> (uri, chunk)."""
    from agents.caller import Caller
    from knowledge.bulk import knowledge_bulk_create
    from knowledge.models import Knowledge

    def key(source) -> tuple:
        document = source["document"]
        return document["uri"], document["chunk"], document["chunk_hash"]

    stored = Knowledge.objects.filter(scopes__contains=[scope])
    rows = list(stored.values_list("id", "source", "embedding_model"))
    if sorted(key(s) for _, s, _ in rows) != sorted(key(e["source"]) for e in entries) \
            or any(model != embedder.name for _, _, model in rows):
        stored.delete()
        for at in range(0, len(entries), BULK_BATCH):
            knowledge_bulk_create(Caller.system("bench"), entries[at : at + BULK_BATCH], vectors=vectors[at : at + BULK_BATCH],
                                  model_name=embedder.name, embed=False)
        rows = list(stored.values_list("id", "source", "embedding_model"))
    return {item_id: key(source)[:2] for item_id, source, _ in rows}


def evaluate_configuration(data: Sample, size: int, overlap: int, embedder, split: dict[str, str], *,
                           mode: str = "hybrid", cache: bool = True) -> dict:
    """Chunk every document with (size, overlap), store the chunks in their own scope, score every question."""
    from bench.runner import OPEN_GATE
    from ingest.chunking import chunk
    from knowledge.search import engine
    from knowledge.search.embeddings import item_text

    scope = f"{SCOPE_PREFIX}:{data.name}:{size}-{overlap}"
    entries, where, lengths = [], {}, []
    for document in data.documents:
        result = extracted(document)
        headings_of = [tuple(block.headings) for block in result.blocks]
        chunks = chunk(result, size=size, overlap=overlap, fallback_title=document.title)
        content_hash = _sha(document.markdown())
        for piece, ranges in zip(chunks, spans(chunks, document, headings_of)):
            where[(document.uri, piece.index)] = ranges
            lengths.append(len(piece.text))
            entries.append(_entry(piece, document, scope, content_hash))
    started = time.monotonic()
    vectors = vectors_for([item_text(e["task"], e["content"]) for e in entries], embedder,
                          cache=f"documents-{data.name}" if cache else None)
    chunk_of = store(scope, entries, vectors, embedder)
    prepared = time.monotonic() - started
    by_document: dict[str, list] = {}
    for (uri, _), ranges in where.items():
        by_document.setdefault(uri, []).append(ranges)
    scores: dict[str, list[dict]] = {"development": [], "held-out": []}
    started = time.monotonic()
    for question in data.questions:
        result = engine.search(query=question.text, top_k=TOP_K, min_score=1, readable_scopes=[scope], mode=mode,
                               embedder_name=embedder.name, gate=OPEN_GATE)
        ranked = [where[chunk_of[hit.id]] for hit in result.hits]
        scores[split[question.id]].append(score(ranked, by_document[question.uri], question))
    searched = time.monotonic() - started
    row = {"dataset": data.name, "size": size, "overlap": overlap, "chunks": len(entries),
           "mean_chars": float(np.mean(lengths)) if lengths else 0.0,
           "ms_per_query": 1000 * searched / max(len(data.questions), 1), "prepare_s": prepared,
           "unplaced": sum(1 for ranges in where.values() if not ranges)}
    for half, rows in scores.items():
        row[half] = {"queries": len(rows), **{m: float(np.mean([r[m] for r in rows])) if rows else 0.0
                                               for m in METRICS}}
    row["ndcg_per_question"] = {half: [r["ndcg@10"] for r in rows] for half, rows in scores.items()}
    return row


def load_query_vectors(data: Sample, embedder) -> None:
    """The questions' vectors from var/bench-cache (shared with bench.retrieval: same ids, same texts)."""
    from bench import datasets
    from bench.runner import _load_query_vectors

    _load_query_vectors(datasets.Dataset(name=data.name, corpus={}, qrels={},
                                         queries={q.id: q.text for q in data.questions}), embedder)


def recommend(rows: list[dict]) -> dict:
    """The configuration with the best mean development nDCG@10 over the datasets, to three decimals (ties: the
    current default, else the larger size and overlap)."""
    from ingest.chunking import DEFAULT_OVERLAP, DEFAULT_SIZE

    by_config: dict[tuple[int, int], list[float]] = {}
    for row in rows:
        by_config.setdefault((row["size"], row["overlap"]), []).append(row["development"]["ndcg@10"])
    (size, overlap), values = max(by_config.items(), key=lambda kv: (
        round(float(np.mean(kv[1])), 3), kv[0] == (DEFAULT_SIZE, DEFAULT_OVERLAP), kv[0]))
    return {"size": size, "overlap": overlap, "development_ndcg@10": float(np.mean(values))}


def versus(row: dict, base: dict, half: str = "held-out") -> tuple[float, float] | None:
    """Mean paired difference of nDCG@10 (row - base) over the same questions and its 95% half-width (normal)."""
    a, b = row["ndcg_per_question"][half], base["ndcg_per_question"][half]
    if not a or len(a) != len(b):
        return None
    diff = np.asarray(a) - np.asarray(b)
    return float(diff.mean()), float(1.96 * diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0


# --- Throughput ---------------------------------------------------------------------------------------------

def render(document: Document, kind: str) -> bytes:
    """The document as a file of `kind` (headings as the kind marks them)."""
    if kind == "markdown":
        return document.markdown().encode()
    if kind == "text":
        parts = [document.title] + [p for heading, paragraphs in document.sections for p in ([heading] if heading else []) + paragraphs]
        return "\n\n".join(parts).encode() + b"\n"
    if kind == "html":
        body = [f"<h1>{escape(document.title)}</h1>"]
        for heading, paragraphs in document.sections:
            body += [f"<h2>{escape(heading)}</h2>"] if heading else []
            body += [f"<p>{escape(p)}</p>" for p in paragraphs]
        return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{escape(document.title)}</title></head>"
                f"<body><article>{''.join(body)}</article></body></html>").encode()
    if kind == "pdf":
        from reportlab.lib.pagesizes import A4
        from reportlab.lib.styles import getSampleStyleSheet
        from reportlab.platypus import Paragraph, SimpleDocTemplate

        styles, out = getSampleStyleSheet(), io.BytesIO()
        flow = [Paragraph(escape(document.title), styles["Heading1"])]
        for heading, paragraphs in document.sections:
            flow += [Paragraph(escape(heading), styles["Heading2"])] if heading else []
            flow += [Paragraph(escape(p), styles["BodyText"]) for p in paragraphs]
        SimpleDocTemplate(out, pagesize=A4, title=document.title).build(flow)
        return out.getvalue()
    if kind == "docx":
        import docx

        out, word = io.BytesIO(), docx.Document()
        word.core_properties.title = document.title
        word.add_heading(document.title, level=1)
        for heading, paragraphs in document.sections:
            if heading:
                word.add_heading(heading, level=2)
            for p in paragraphs:
                word.add_paragraph(p)
        word.save(out)
        return out.getvalue()
    raise ValueError(kind)


def _timed(work, min_seconds: float) -> tuple[float, int]:
    """(seconds per run, runs): `work` repeated until min_seconds have passed (at least once)."""
    runs, started = 0, time.perf_counter()
    while True:
        work()
        runs += 1
        elapsed = time.perf_counter() - started
        if elapsed >= min_seconds:
            return elapsed / runs, runs


def throughput(english: list[Document], chinese: list[Document], *, embed_chunks: int = 16, bulk_items: int = 200,
               min_seconds: float = 2.0) -> dict:
    from pypdf import PdfReader

    from agents.caller import Caller
    from ingest.chunking import chunk
    from ingest.extract import extract
    from knowledge.bulk import knowledge_bulk_create
    from knowledge.models import Knowledge
    from knowledge.search.embeddings import get_embedder, item_text

    cases = [("markdown", "en", english), ("text", "en", english), ("html", "en", english), ("pdf", "en", english),
             ("docx", "en", english), ("markdown", "zh", chinese)]
    extract_rows, chunk_rows, chunks_by_language = [], [], {"en": [], "zh": []}
    for kind, language, documents in cases:
        if not documents:
            continue
        files = [render(d, kind) for d in documents]
        pages = sum(len(PdfReader(io.BytesIO(f)).pages) for f in files) if kind == "pdf" else 0
        results = [extract(f, kind) for f in files]
        text_kb = sum(len(b.text.encode()) for r in results for b in r.blocks) / 1000
        seconds, _ = _timed(lambda files=files, kind=kind: [extract(f, kind) for f in files], min_seconds)
        extract_rows.append({"kind": kind, "language": language, "documents": len(files), "file_kb": sum(map(len, files)) / 1000,
                             "text_kb": text_kb, "pages": pages, "kb_per_s": sum(map(len, files)) / 1000 / seconds,
                             "text_kb_per_s": text_kb / seconds, "pages_per_s": pages / seconds if pages else None,
                             "ms_per_document": 1000 * seconds / len(files)})
        titles = [r.title or d.title for r, d in zip(results, documents)]
        pairs = list(zip(results, titles))
        made = [chunk(r, fallback_title=t) for r, t in pairs]
        seconds, _ = _timed(lambda pairs=pairs: [chunk(r, fallback_title=t) for r, t in pairs], min_seconds)
        chunk_rows.append({"kind": kind, "language": language, "text_kb": text_kb, "chunks": sum(map(len, made)),
                           "kb_per_s": text_kb / seconds})
        if kind == "markdown":
            chunks_by_language[language] = [c for cs in made for c in cs]

    embedder = get_embedder()
    vectors_for(["warm-up"], embedder, cache=None)
    embed_rows, pooled = [], []
    for language, chunks in chunks_by_language.items():
        chunks = chunks[:embed_chunks]
        if not chunks:
            continue
        texts = [item_text(c.title, c.text) for c in chunks]
        started = time.perf_counter()
        vectors = vectors_for(texts, embedder, cache=None)
        seconds = time.perf_counter() - started
        kb = sum(len(t.encode()) for t in texts) / 1000
        embed_rows.append({"language": language, "chunks": len(chunks), "mean_chars": float(np.mean([len(t) for t in texts])),
                           "chunks_per_s": len(chunks) / seconds, "kb_per_s": kb / seconds,
                           "chars_per_s": sum(map(len, texts)) / seconds})
        pooled += [(c, v) for c, v in zip(chunks, vectors)]

    Knowledge.objects.filter(scopes__contains=[THROUGHPUT_SCOPE]).delete()
    picked = [pooled[n % len(pooled)] for n in range(bulk_items)]
    entries = [{"task": c.title[:10_000], "content": c.text, "types": TYPES, "scopes": [THROUGHPUT_SCOPE],
                "source": {"name": c.title, "category": "document"}} for c, _ in picked]
    vectors = [v for _, v in picked]
    started = time.perf_counter()
    for at in range(0, len(entries), BULK_BATCH):
        knowledge_bulk_create(Caller.system("bench"), entries[at : at + BULK_BATCH], vectors=vectors[at : at + BULK_BATCH],
                              model_name=embedder.name, embed=False)
    seconds = time.perf_counter() - started
    Knowledge.objects.filter(scopes__contains=[THROUGHPUT_SCOPE]).delete()
    return {"extract": extract_rows, "chunk": chunk_rows, "embedding": embed_rows,
            "bulk": {"items": len(entries), "items_per_s": len(entries) / seconds}}


# --- The run and its report ---------------------------------------------------------------------------------

def run(*, datasets=DATASETS, sizes=(400, 800, 1200, 2000), overlaps=(0, 150), documents=None, max_queries: int = 0,
        mode: str = "hybrid", throughput_documents: int = 20, embed_chunks: int = 16, bulk_items: int = 200,
        min_seconds: float = 2.0, cache: bool = True) -> dict:
    """Both measurements; `documents` maps a dataset to how many documents to sample (default 60 CMRC, all 48 XQuAD-R)."""
    from bench.machine import describe
    from ingest.chunking import MIN_SIZE
    from knowledge.search.embeddings import get_embedder

    started = time.monotonic()
    documents = {CMRC: 60, XQUAD: 48, **(documents or {})}
    configurations = [(s, o) for s in sizes for o in overlaps if s >= MIN_SIZE and 0 <= o < s // 2]
    embedder = get_embedder()
    samples, rows = {}, []
    for name in datasets:
        data = sample(name, documents[name])
        if max_queries:
            data.questions = data.questions[:max_queries]
        samples[name] = data
        split = halves(name)
        load_query_vectors(data, embedder)
        for size, overlap in configurations:
            row = evaluate_configuration(data, size, overlap, embedder, split, mode=mode, cache=cache)
            rows.append(row)
            print(f"  {name} {size}/{overlap}: {row['chunks']} chunks ({row['unplaced']} not placed in their document), "
                  f"stored in {row['prepare_s']:.0f} s, {row['ms_per_query']:.0f} ms/query", file=sys.stderr, flush=True)
    described = {}
    for name, s in samples.items():
        first = next((row for row in rows if row["dataset"] == name), None)
        described[name] = {"documents": len(s.documents), "passages": sum(len(d.paragraphs) for d in s.documents),
                           "characters": sum(len(p) for d in s.documents for p in d.paragraphs),
                           "questions": len(s.questions),
                           "development": first["development"]["queries"] if first else 0,
                           "held-out": first["held-out"]["queries"] if first else 0}
    english = samples[XQUAD].documents[:throughput_documents] if XQUAD in samples else xquad_sample(
        throughput_documents, np.random.default_rng(SEED)).documents
    chinese = samples[CMRC].documents[:throughput_documents] if CMRC in samples else cmrc_sample(
        throughput_documents, np.random.default_rng(SEED)).documents
    speeds = throughput(english, chinese, embed_chunks=embed_chunks, bulk_items=bulk_items, min_seconds=min_seconds)
    return {"machine": describe(), "embedder": embedder.name, "mode": mode, "samples": described,
            "chunking": rows, "recommended": recommend(rows) if rows else None, "throughput": speeds,
            "seconds": time.monotonic() - started}


def format_report(report: dict) -> str:
    from ingest.chunking import DEFAULT_OVERLAP, DEFAULT_SIZE

    out = [report["machine"], f"embedder {report['embedder']}, {report['mode']} search, top {TOP_K}", ""]
    for name, s in report["samples"].items():
        out.append(f"{name}: {s['documents']} documents, {s['passages']} passages, {s['characters']:,} characters; "
                   f"{s['questions']} questions ({s['development']} development, {s['held-out']} held-out)")
    recommended = report["recommended"]
    defaults = {row["dataset"]: row for row in report["chunking"] if (row["size"], row["overlap"]) == (DEFAULT_SIZE, DEFAULT_OVERLAP)}
    for half in ("development", "held-out"):
        out += ["", f"Chunking, {half} half:", "",
                ("| dataset | size / overlap | chunks | mean chars | queries | recall@1 | recall@5 | hit@1 | nDCG@10 | "
                 f"Δ nDCG@10 vs {DEFAULT_SIZE}/{DEFAULT_OVERLAP} (95%) |"),
                "|---|---|---|---|---|---|---|---|---|---|"]
        for row in report["chunking"]:
            mark = " (default)" if (row["size"], row["overlap"]) == (DEFAULT_SIZE, DEFAULT_OVERLAP) else ""
            if recommended and (row["size"], row["overlap"]) == (recommended["size"], recommended["overlap"]):
                mark += " **best on development**"
            m = row[half]
            delta = versus(row, defaults[row["dataset"]], half) if row["dataset"] in defaults and not mark.startswith(" (default)") else None
            shown = f"{delta[0]:+.3f} ± {delta[1]:.3f}" if delta else ""
            out.append(f"| {row['dataset']} | {row['size']} / {row['overlap']}{mark} | {row['chunks']} | {row['mean_chars']:.0f} | "
                       f"{m['queries']} | {m['recall@1']:.3f} | {m['recall@5']:.3f} | {m['hit@1']:.3f} | {m['ndcg@10']:.3f} | {shown} |")
    t = report["throughput"]
    out += ["", "Throughput:", "", "| stage | input | documents / items | KB/s | other |", "|---|---|---|---|---|"]
    for row in t["extract"]:
        other = f"{row['text_kb_per_s']:,.0f} KB/s of text, {row['ms_per_document']:.1f} ms/document"
        if row["pages_per_s"]:
            other += f", {row['pages_per_s']:,.1f} pages/s ({row['pages']} pages)"
        out.append(f"| extract | {row['kind']} ({row['language']}), {row['file_kb']:,.0f} KB | {row['documents']} | "
                   f"{row['kb_per_s']:,.0f} | {other} |")
    for row in t["chunk"]:
        out.append(f"| chunk {DEFAULT_SIZE}/{DEFAULT_OVERLAP} | {row['kind']} ({row['language']}), {row['text_kb']:,.0f} KB of text | "
                   f"{row['chunks']} chunks | {row['kb_per_s']:,.0f} | |")
    for row in t["embedding"]:
        out.append(f"| embed ({report['embedder']}) | chunks ({row['language']}), {row['mean_chars']:.0f} chars each | "
                   f"{row['chunks']} | {row['kb_per_s']:.2f} | {row['chunks_per_s']:.2f} chunks/s, {row['chars_per_s']:,.0f} chars/s |")
    out.append(f"| knowledge_bulk_create, vectors given | chunks | {t['bulk']['items']} | | {t['bulk']['items_per_s']:.0f} items/s |")
    if recommended:
        held = {row["dataset"]: row["held-out"]["ndcg@10"] for row in report["chunking"]
                if (row["size"], row["overlap"]) == (recommended["size"], recommended["overlap"])}
        default = {row["dataset"]: row["held-out"]["ndcg@10"] for row in report["chunking"]
                   if (row["size"], row["overlap"]) == (DEFAULT_SIZE, DEFAULT_OVERLAP)}
        line = (f"Chunk defaults: best on development {recommended['size']}/{recommended['overlap']} "
                f"(mean nDCG@10 {recommended['development_ndcg@10']:.3f}); held-out nDCG@10 "
                + ", ".join(f"{name} {value:.3f}" for name, value in held.items()))
        if default:
            line += f" vs {DEFAULT_SIZE}/{DEFAULT_OVERLAP} " + ", ".join(f"{name} {value:.3f}" for name, value in default.items())
        emb = {row["language"]: row["chunks_per_s"] for row in t["embedding"]}
        line += ("; embedding " + ", ".join(f"{v:.1f} chunks/s ({k})" for k, v in emb.items())
                 + f", bulk {t['bulk']['items_per_s']:.0f} items/s.")
        out += ["", line]
    out.append(f"\n({report['seconds']:.0f} s)")
    return "\n".join(out)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv=None, *, setup: bool = True) -> dict:
    """Parse the arguments, run both measurements on the bench database and print the report; returns it.

    `setup=False` leaves Django as it is (a test's database)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="400,800,1200,2000", help="chunk sizes, characters")
    parser.add_argument("--overlaps", default="0,150", help="overlaps, characters (each below half the size)")
    parser.add_argument("--max-queries", type=int, default=0, help="at most N questions per dataset (0 = all on the sampled documents)")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--cmrc-documents", type=int, default=60, help="CMRC documents of four passages (at most 99)")
    parser.add_argument("--xquad-documents", type=int, default=48, help="XQuAD-R English articles (at most 48)")
    parser.add_argument("--mode", default="hybrid", choices=["hybrid", "vector", "keyword"])
    parser.add_argument("--throughput-documents", type=int, default=20)
    parser.add_argument("--embed-chunks", type=int, default=16, help="chunks embedded per language for the throughput")
    parser.add_argument("--bulk-items", type=int, default=200)
    parser.add_argument("--min-seconds", type=float, default=2.0, help="time each extract / chunk measurement at least this long")
    parser.add_argument("--no-cache", action="store_true", help="embed the chunks again instead of reading var/bench-cache")
    args = parser.parse_args(argv)
    if setup:
        from bench.retrieval import _point_at_bench_database

        _point_at_bench_database(DATABASE)
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
    report = run(datasets=[d for d in args.datasets.split(",") if d], sizes=_ints(args.sizes), overlaps=_ints(args.overlaps),
                 documents={CMRC: args.cmrc_documents, XQUAD: args.xquad_documents}, max_queries=args.max_queries,
                 mode=args.mode, throughput_documents=args.throughput_documents, embed_chunks=args.embed_chunks,
                 bulk_items=args.bulk_items, min_seconds=args.min_seconds, cache=not args.no_cache)
    print(format_report(report), flush=True)
    return report


if __name__ == "__main__":
    main()
    sys.exit(0)
