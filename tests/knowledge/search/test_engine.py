"""Search through the real stack: embedder, pgvector, full text, fusion, rerank."""
import numpy as np
import pytest
from django.db import connection, transaction

from knowledge.models import Knowledge
from knowledge.search import engine
from knowledge.search.indexing import embed_items, store_embeddings
from knowledge.search.rerank import Gate
from knowledge.search.vector import ensure_index, vector_candidates
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db

CORPUS = {
    "selenium": ("使用 Selenium 登录某网站并绕过反爬检测", "使用 undetected_chromedriver 可以绕过大部分检测。关键点:1) 设置合适的 user-agent 2) 随机延迟 3) 避免频繁请求"),
    "tabs": ("Write Python code the way this user likes", "The user prefers tabs over spaces, type hints everywhere and short functions."),
    "reset": ("Fix ERR_CONNECTION_RESET while scraping", "Retry with exponential backoff and rotate proxies; the server drops bursts."),
    "weather": ("天气查询工具的用法", "调用天气接口时需要传入城市编码，返回未来七天的温度和降雨概率。"),
    "invoice": ("Reconcile monthly invoices", "Export the ledger as CSV, match invoice numbers, flag amounts that differ by more than one cent."),
}


@pytest.fixture
def corpus():
    items = {key: make_knowledge(task=task, content=content, embed=False) for key, (task, content) in CORPUS.items()}
    embed_items(items=list(items.values()))
    return {key: item.id for key, item in items.items()}


def top(query, **kwargs):
    kwargs.setdefault("top_k", 3)
    kwargs.setdefault("min_score", 1)
    return [hit.id for hit in engine.search(query=query, **kwargs).hits]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("如何绕过网站的反爬虫检测", "selenium"),  # zh -> zh
        ("which indentation does the user prefer", "tabs"),  # en -> en
        ("bypass bot detection when logging in with a browser", "selenium"),  # en -> zh
        ("查询明天会不会下雨", "weather"),  # zh -> zh
        ("will it rain tomorrow in this city", "weather"),  # en -> zh
        ("对账 发票 金额", "invoice"),  # zh -> en
        ("用户喜欢的代码风格", "tabs"),  # zh -> en
    ],
)
def test_chinese_and_english_queries_find_the_right_item(corpus, query, expected):
    assert top(query)[0] == corpus[expected]


@pytest.mark.parametrize(("query", "expected"), [("undetected_chromedriver", "selenium"), ("ERR_CONNECTION_RESET", "reset")])
def test_exact_identifiers_match_by_keyword(corpus, query, expected):
    assert top(query, mode="keyword") == [corpus[expected]]


def test_chinese_keyword_search_matches_segmented_words(corpus):
    assert top("降雨概率", mode="keyword") == [corpus["weather"]]


def test_each_mode_runs_and_hybrid_explains_both_ranks(corpus):
    result = engine.search(query="proxy retry backoff", top_k=2, min_score=1)
    hit = result.hits[0]
    assert hit.id == corpus["reset"]
    assert hit.explanation["keyword_rank"] == 1 and hit.explanation["vector_rank"] == 1
    assert hit.explanation["fused_score"] > 0 and hit.explanation["quality_score"] == 3.0
    assert len(result.candidates) <= 4


def test_a_new_item_is_keyword_searchable_as_soon_as_it_is_saved():
    item = make_knowledge(task="Rotate the Kubernetes etcd encryption key", content="Use kubectl and restart the apiserver.", embed=False)
    assert top("etcd encryption", mode="keyword") == [item.id]


def test_scopes_the_caller_cannot_read_are_never_returned(corpus):
    secret = make_knowledge(task="Bypass bot detection with Selenium", content="undetected_chromedriver trick", scopes=["org:other"], embed=False)
    embed_items(items=[secret])
    mine = ["org:acme"]
    assert secret.id not in top("selenium undetected_chromedriver", readable_scopes=mine, top_k=10)
    assert secret.id not in top("selenium", readable_scopes=mine, scopes=["org:other"], top_k=10)
    assert secret.id not in top("selenium", readable_scopes=mine, filters={"op": "EQ", "key": "scopes", "value": "org:other"})
    or_filter = {"op": "OR", "conditions": [{"op": "EQ", "key": "scopes", "value": "org:other"}, {"op": "GTE", "key": "score", "value": 1}]}
    assert secret.id not in top("selenium", readable_scopes=mine, filters=or_filter, top_k=10)
    assert secret.id in top("selenium undetected_chromedriver", readable_scopes=["org:other"])


@pytest.mark.parametrize("change", [{"scopes": ["org:other"]}, {"status": "archived"}])
def test_an_item_edited_out_of_reach_between_the_stages_is_not_returned_as_it_now_is(corpus, monkeypatch, change):
    """Stage 1 found the item; before stage 2 read its row it moved to a scope the caller cannot read (or was
    archived): the search leaves it out and still fills its list from the rest."""
    found_by_vector = engine.calibrated_vector_candidates

    def and_then_edited(*args, **kwargs):
        found = found_by_vector(*args, **kwargs)
        Knowledge.objects.filter(pk=corpus["reset"]).update(**change)
        return found

    mine = ["org:acme"]
    Knowledge.objects.update(scopes=mine)
    assert top("ERR_CONNECTION_RESET retry backoff", readable_scopes=mine)[0] == corpus["reset"]
    monkeypatch.setattr(engine, "calibrated_vector_candidates", and_then_edited)
    result = engine.search(query="ERR_CONNECTION_RESET retry backoff", readable_scopes=mine, top_k=3, min_score=0,
                           gate=Gate(answer=0.0, floor=0.0, relative=0.0))
    assert corpus["reset"] not in [c.id for c in result.candidates] and corpus["reset"] not in result.items
    assert len(result.hits) == 3


def test_types_tags_and_filters_narrow_results(corpus):
    plan = make_knowledge(task="Plan a scraping job with proxies", content="rotate proxies, back off", types=["plan"], tags={"domain": "scraping"}, embed=False)
    embed_items(items=[plan])
    assert top("proxies backoff", types=["plan"]) == [plan.id]
    assert top("proxies backoff", tags={"domain": "scraping"}) == [plan.id]
    assert plan.id not in top("proxies backoff", filters={"op": "NEQ", "key": "tags.domain", "value": "scraping"}, top_k=10)


def test_merged_and_archived_items_are_left_out_unless_asked_for(corpus):
    Knowledge.objects.filter(pk=corpus["reset"]).update(status="archived")
    assert corpus["reset"] not in top("ERR_CONNECTION_RESET", top_k=10)
    assert top("ERR_CONNECTION_RESET", statuses=["archived"]) == [corpus["reset"]]


def test_quality_rerank_applies_to_search_results(corpus):
    Knowledge.objects.filter(pk=corpus["invoice"]).update(harmful=5)
    assert corpus["invoice"] not in top("reconcile invoices ledger", top_k=5)
    Knowledge.objects.filter(pk=corpus["tabs"]).update(score=2)
    assert corpus["tabs"] not in top("user prefers tabs", min_score=3, top_k=5)


def test_stale_vectors_from_another_model_are_not_compared(corpus):
    Knowledge.objects.filter(pk=corpus["weather"]).update(embedding_model="some-old-model")
    result = engine.search(query="rain forecast", top_k=5, min_score=1, mode="vector")
    assert corpus["weather"] not in [hit.id for hit in result.hits]


@pytest.mark.parametrize("exact_scan_max_rows", [2000, 0], ids=["exact-scan", "iterative-hnsw"])
def test_filtered_vector_search_finds_items_plain_hnsw_misses(monkeypatch, exact_scan_max_rows):
    """2,000 items crowd the query's neighbourhood; the 15 in a small scope lie further out."""
    from knowledge.search import vector

    monkeypatch.setattr(vector, "EXACT_SCAN_MAX_ROWS", exact_scan_max_rows)
    rng = np.random.default_rng(0)
    dims, model = 16, "synthetic-test"
    query = np.zeros(dims)
    query[0] = 1.0
    rows = []
    for i in range(2015):
        small = i < 15
        v = rng.normal(size=dims) * (1.0 if small else 0.1)
        v[0] = -0.2 if small else 1.0
        rows.append(Knowledge(
            id=f"knowledge-20260101-{i:05d}", types=["tool"], task=f"t{i}", content="c", owner="agent:x",
            scopes=["org:small"] if small else ["org:big"], embedding=(v / np.linalg.norm(v)).tolist(), embedding_model=model,
        ))
    Knowledge.objects.bulk_create(rows)
    ensure_index.cache_clear()
    ensure_index(model, dims)
    small_ids = {r.id for r in rows[:15]}
    in_small = Knowledge.objects.filter(scopes__overlap=["org:small"])

    # The plain index scan (no iterative scan) sees only the crowd, then filters it away.
    plain = (
        in_small.filter(embedding_model=model, script="").annotate(d=vector_distance(query, dims)).order_by("d").values_list("id", flat=True)[:10]
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        sql, params = plain.query.sql_with_params()
        cursor.execute("EXPLAIN " + sql, params)
        assert "knowledge_hnsw_synthetic_test_16_none" in " ".join(row[0] for row in cursor.fetchall())  # no letters
        cursor.execute("SET LOCAL hnsw.ef_search = 40")
        cursor.execute("SET LOCAL hnsw.iterative_scan = off")
        missed = list(plain)
    assert len(missed) < 10

    found = vector_candidates(in_small.filter(script=""), vector=query, model_name=model, dimensions=dims, limit=10)
    assert len(found) == 10 and {item_id for item_id, _ in found} <= small_ids


def vector_distance(query, dims):
    from knowledge.search.vector import distance_expression

    return distance_expression(query.tolist(), dims)


def test_store_embeddings_marks_the_model():
    item = make_knowledge(embed=False)
    store_embeddings(ids=[item.id], vectors=[[1.0, 0.0, 0.0]], model_name="tiny")
    item.refresh_from_db()
    assert item.embedding_model == "tiny" and list(item.embedding) == [1.0, 0.0, 0.0]


def test_stage_two_weighs_each_candidates_cosine_under_each_model_and_none_for_a_pending_vector(corpus):
    from knowledge.search.embeddings import get_embedder

    pending = make_knowledge(task="Rotate proxies when scraping", content="A pool of proxies, one per request.", embed=False)
    embedder = get_embedder()
    query = "retry scraping with proxies"
    result = engine.search(query=query, top_k=10, min_score=1)
    judged = {candidate.id: candidate.evidence for candidate in result.candidates}
    assert pending.id in judged and judged[pending.id].e5 is None and judged[pending.id].use is None
    query_parts = [part.embed_query(query) for part in embedder.parts]
    for item_id, evidence in judged.items():
        if item_id == pending.id:
            continue
        stored = np.asarray(Knowledge.objects.get(pk=item_id).embedding, dtype=np.float64)
        start, expected = 0, []
        for part, q in zip(embedder.parts, query_parts):
            piece = stored[start:start + part.dimensions]
            expected.append(float(piece @ q / (np.linalg.norm(piece) * np.linalg.norm(q))))
            start += part.dimensions
        assert (evidence.e5, evidence.use) == pytest.approx(tuple(expected), abs=1e-5)


def test_a_listing_and_a_search_asking_for_100_results_can_fill_them():
    for n in range(120):
        make_knowledge(task=f"Restart service {n} after a deploy", content=f"Run systemctl restart svc-{n}.", embed=False)
    assert len(engine.search(query="", top_k=100, min_score=1).hits) == 100  # the newest 100
    keyword_only = engine.search(query="restart service deploy", top_k=100, min_score=1, mode="keyword")
    assert len(keyword_only.candidates) == 120  # the keyword list is 200 long at top_k 100: every match, not the best 100
