"""Keeping an item's keyword document and embedding in step with its text."""
import logging
from collections.abc import Iterator

from django.db import transaction
from django.db.models import Q

from knowledge.models import Knowledge
from knowledge.search import keyword, vector
from knowledge.search.embeddings import Embedder, EmbedderError, get_embedder, item_text
from knowledge.search.text import script_of

logger = logging.getLogger(__name__)


def index_keywords(*, item: Knowledge) -> None:
    """Recompute `search_document` and `script` (call inside the transaction that saved the item)."""
    Knowledge.objects.filter(pk=item.pk).update(
        search_document=keyword.document_expression(task=item.task, content=item.content, tags=item.tags),
        script=script_of(item_text(item.task, item.content)),
    )


def store_embeddings(*, ids: list[str], vectors, model_name: str) -> None:
    """Write vectors computed elsewhere (a batch job, a benchmark cache)."""
    rows = [Knowledge(pk=item_id, embedding=list(map(float, v)), embedding_model=model_name) for item_id, v in zip(ids, vectors)]
    Knowledge.objects.bulk_update(rows, ["embedding", "embedding_model"], batch_size=500)


def embed_items(*, items: list[Knowledge], embedder: Embedder | None = None) -> None:
    """Embed task + content of `items` and store the vectors. Raises EmbedderError."""
    embedder = embedder or get_embedder()
    if not items:
        return
    vectors = embedder.embed_passages([item_text(i.task, i.content) for i in items])
    vector.ensure_index(embedder.name, embedder.dimensions)
    store_embeddings(ids=[i.pk for i in items], vectors=vectors, model_name=embedder.name)


def embed_now_or_later(*, knowledge_id: str) -> bool:
    """Embed one item right away; if the embedder fails, queue a retrying job.

    Returns True when the item was embedded now. The item stays saved and
    keyword-searchable either way.
    """
    item = Knowledge.objects.filter(pk=knowledge_id).only("id", "task", "content").first()
    if item is None:
        return False
    try:
        embed_items(items=[item])
        return True
    except EmbedderError as exc:
        logger.warning("embedding %s failed (%s); queued for later", knowledge_id, exc)
        from knowledge.tasks import embed_knowledge

        embed_knowledge.delay(knowledge_id)
        return False


def stale_items(model_name: str):
    """Items without a vector from `model_name`, oldest first (stable for resuming)."""
    return Knowledge.objects.filter(Q(embedding__isnull=True) | ~Q(embedding_model=model_name)).order_by("created_at", "id")


def reembed_batches(*, embedder: Embedder, batch_size: int = 64) -> Iterator[int]:
    """Embed every stale item, one committed batch at a time; yields batch sizes.

    Each batch commits on its own, so an interrupted run resumes where it stopped.
    """
    while True:
        batch = list(stale_items(embedder.name).only("id", "task", "content")[:batch_size])
        if not batch:
            return
        with transaction.atomic():
            embed_items(items=batch, embedder=embedder)
        yield len(batch)

