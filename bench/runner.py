"""Loading a dataset into KnowHub and scoring searches against its qrels."""
import re
import sys
import time
from functools import lru_cache

from django.conf import settings

from agents.caller import Caller
from bench import datasets, metrics
from bench.embed_cache import cached_matrix
from knowledge.models import Knowledge
from knowledge.search import engine
from knowledge.search.embeddings import get_embedder, item_text
from knowledge.search.fusion import RRF_K
from knowledge.search.indexing import store_embeddings
from knowledge.search.rerank import Gate
from knowledge.search.vector import ensure_index
from knowledge.services import knowledge_create

TOP_K = 10
OPEN_GATE = Gate(answer=0.0, floor=0.0, relative=0.0)


def scope_for(name: str) -> str:
    return f"bench:{name}"


def ingest(data: datasets.Dataset) -> dict[str, str]:
    """Create one item per document (once); returns knowledge id -> doc id."""
    scope = scope_for(data.name)
    existing = dict(Knowledge.objects.filter(scopes__contains=[scope]).values_list("id", "message_id"))
    if len(existing) != len(data.corpus):
        Knowledge.objects.filter(scopes__contains=[scope]).delete()
        for n, (doc_id, doc) in enumerate(data.corpus.items(), start=1):
            knowledge_create(
                Caller.system("bench"), task=doc["title"] or doc["text"][:80], content=doc["text"], types=["definition"], scopes=[scope],
                message_id=doc_id, embed=False,
            )
            if n % 500 == 0 or n == len(data.corpus):
                print(f"\r  {data.name}: {n}/{len(data.corpus)} items stored", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        existing = dict(Knowledge.objects.filter(scopes__contains=[scope]).values_list("id", "message_id"))
    return existing


def embed_corpus(data: datasets.Dataset, ids_by_doc: dict[str, str], embedder) -> None:
    scope = scope_for(data.name)
    if not Knowledge.objects.filter(scopes__contains=[scope]).exclude(embedding_model=embedder.name).exists():
        return
    doc_ids = list(data.corpus)
    texts = [item_text(d["title"], d["text"]) for d in data.corpus.values()]
    vectors = cached_matrix(cache_dir=settings.VAR_DIR / "bench-cache", dataset=data.name, embedder=embedder,
                            ids=doc_ids, texts=texts)
    store_embeddings(ids=[ids_by_doc[d] for d in doc_ids], vectors=vectors, model_name=embedder.name)
    ensure_index(embedder.name, embedder.dimensions)


def _load_query_vectors(data: datasets.Dataset, embedder) -> None:
    """Serve this dataset's query vectors from var/bench-cache (computing what is missing); other texts embedded once each."""
    ids, texts = list(data.queries), list(data.queries.values())
    vectors = cached_matrix(cache_dir=settings.VAR_DIR / "bench-cache", dataset=data.name, embedder=embedder,
                            ids=ids, texts=texts, queries=True)
    known = dict(zip(texts, vectors))
    # The embedder is process-wide: keep its own method once, whichever dataset ran before.
    compute = embedder.__dict__.setdefault("_embed_query_uncached", embedder.embed_query)
    embedder.embed_query = lru_cache(maxsize=None)(lambda text: known[text] if text in known else compute(text))


def prepare(data: datasets.Dataset, embedder_name: str | None = None):
    """The dataset stored and embedded, and an embedder whose query vectors come from the cache.

    Returns (embedder, knowledge id -> doc id).
    """
    embedder = get_embedder(embedder_name or settings.KNOWHUB_EMBEDDING_MODEL)
    _load_query_vectors(data, embedder)
    doc_by_id = ingest(data)
    embed_corpus(data, {doc: kid for kid, doc in doc_by_id.items()}, embedder)
    return embedder, doc_by_id


def evaluate(name, *, modes, embedder_name=None, max_queries=0, query_prefix="", relevant_prefix="", rrf_k=None,
             weights=None, fusion=None):
    data = datasets.load(name)
    embedder, doc_by_id = prepare(data, embedder_name)

    queries = [(qid, text) for qid, text in data.queries.items() if qid.startswith(query_prefix)]
    if max_queries:
        queries = queries[:max_queries]
    scope = scope_for(data.name)
    for mode in modes:
        ndcg, recall, mrr = [], [], []
        started = time.monotonic()
        for qid, text in queries:
            relevant = {d: r for d, r in data.qrels[qid].items() if d.startswith(relevant_prefix)}
            if not relevant:
                continue
            result = engine.search(
                query=text, top_k=TOP_K, min_score=1, readable_scopes=[scope], mode=mode,
                rrf_k=rrf_k or RRF_K, weights=weights, embedder_name=embedder.name,
                fusion=fusion or engine.DEFAULT_FUSION,
                gate=OPEN_GATE,  # this bench measures retrieval; bench/ranking.py measures the gate
            )
            ranked = [doc_by_id[hit.id] for hit in result.hits]
            ndcg.append(metrics.ndcg_at_k(ranked, relevant, TOP_K))
            recall.append(metrics.recall_at_k(ranked, relevant, TOP_K))
            mrr.append(metrics.mrr_at_k(ranked, relevant, TOP_K))
        elapsed = time.monotonic() - started
        yield {
            "dataset": data.name + (f" [{query_prefix}*→{relevant_prefix}*]" if query_prefix or relevant_prefix else ""),
            "queries": len(ndcg),
            "mode": mode if mode != "hybrid" else f"hybrid {fusion or engine.DEFAULT_FUSION} {weights or ''}".strip(),
            "ndcg@10": metrics.mean(ndcg),
            "recall@10": metrics.mean(recall),
            "mrr@10": metrics.mean(mrr),
            "ms_per_query": 1000 * elapsed / max(len(ndcg), 1),
        }


def question_of(query_id) -> str:
    """The question a query asks: XQuAD-R's `en-X` and `zh-X` are one question in two languages."""
    return re.sub(r"^(en|zh)-", "", str(query_id))


def _halves(queries: dict[str, str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Questions alternate between the halves in file order; every query of a question goes with it.

    So both halves hold both languages of a bilingual set, and no held-out
    query is the translation of one tuned on. For a set of distinct
    questions this is even positions / odd positions.
    """
    order = list(dict.fromkeys(question_of(qid) for qid in queries))
    parity = {question: i % 2 for i, question in enumerate(order)}
    pairs = list(queries.items())
    return [p for p in pairs if parity[question_of(p[0])] == 0], [p for p in pairs if parity[question_of(p[0])] == 1]


def development(queries: dict[str, str]) -> list[tuple[str, str]]:
    """The half of a dataset's queries used to fit and tune (even questions in the file)."""
    return _halves(queries)[0]


def held_out(queries: dict[str, str]) -> list[tuple[str, str]]:
    """The other half: only ever scored, never tuned on (odd questions)."""
    return _halves(queries)[1]


def half(split: str, queries: dict[str, str]) -> list[tuple[str, str]]:
    """`development` or `held_out` of `queries`, by the split's name ("development" or "held-out")."""
    return (development if split == "development" else held_out)(queries)
