"""Keeping an item's keyword document and embedding in step with its text."""
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DatabaseError, transaction
from django.db.models import Q

from core import outbox
from knowledge.models import Knowledge
from knowledge.search import keyword, vector
from knowledge.search.embeddings import Embedder, get_embedder, item_text
from knowledge.search.text import script_of

logger = logging.getLogger(__name__)


def keyword_fields(*, task: str, content: str, tags: dict) -> dict:
    """`search_document` (an SQL expression computing the tsvector) and `script` for this text: what a new item's
    INSERT stores with it, and what `index_keywords` writes after an edit."""
    return {"search_document": keyword.document_expression(task=task, content=content, tags=tags),
            "script": script_of(item_text(task, content))}


def index_keywords(*, item: Knowledge) -> None:
    """Recompute `search_document` and `script` (call inside the transaction that saved the item)."""
    Knowledge.objects.filter(pk=item.pk).update(**keyword_fields(task=item.task, content=item.content, tags=item.tags))


def store_embeddings(*, ids: list[str], vectors, model_name: str) -> None:
    """Write vectors computed elsewhere (a batch job, a benchmark cache)."""
    rows = [Knowledge(pk=item_id, embedding=list(map(float, v)), embedding_model=model_name) for item_id, v in zip(ids, vectors)]
    Knowledge.objects.bulk_update(rows, ["embedding", "embedding_model"], batch_size=500)


# A text is embedded in pieces the model reads whole (e5 reads about 512 tokens),
# at most EMBED_MAX_CHUNKS of them: a save costs the same bounded work whatever its
# length, and what lies beyond is found by keyword search only.
EMBED_CHUNK_CHARS = 2_000
EMBED_MAX_CHUNKS = 8
EMBED_BATCH = 32


def embedding_chunks(text: str) -> list[str]:
    """`text` cut at line or sentence ends into at most EMBED_MAX_CHUNKS pieces of ≤ EMBED_CHUNK_CHARS."""
    chunks, rest = [], text
    while rest.strip() and len(chunks) < EMBED_MAX_CHUNKS:
        piece = rest[:EMBED_CHUNK_CHARS]
        if len(rest) > EMBED_CHUNK_CHARS:
            cut = max(piece.rfind(mark) for mark in ("\n", "。", ". ", "! ", "? ", "；", "; "))
            if cut >= EMBED_CHUNK_CHARS // 2:
                piece = piece[: cut + 1]
        chunks.append(piece)
        rest = rest[len(piece):]
    return [c.strip() for c in chunks if c.strip()] or [text]


def _pooled(embedder: Embedder, vectors) -> list[float]:
    """One vector for several chunks: their mean, normalised per model so the fused cosine keeps its weights."""
    import numpy as np

    mean = np.asarray(vectors, dtype=np.float32).mean(axis=0)
    parts = getattr(embedder, "parts", None)
    if not parts:
        return list(map(float, mean / max(np.linalg.norm(mean), 1e-12)))
    pieces, start = [], 0
    for part, scale in zip(parts, embedder._scales):
        piece = mean[start : start + part.dimensions]
        pieces.append(scale * piece / max(np.linalg.norm(piece), 1e-12))
        start += part.dimensions
    return list(map(float, np.concatenate(pieces)))


def embed_items(*, items: list[Knowledge], embedder: Embedder | None = None) -> int:
    """Embed task + content of `items` and store the vectors; returns how many were stored. Raises EmbedderError.

    A vector is stored only while the item still has the text it was computed
    from, so an edit racing with this never ends up with the old text's vector.
    """
    embedder = embedder or get_embedder()
    if not items:
        return 0
    chunked = [embedding_chunks(item_text(i.task, i.content)) for i in items]
    flat = [chunk for chunks in chunked for chunk in chunks]
    vectors = [row for start in range(0, len(flat), EMBED_BATCH)
               for row in embedder.embed_passages(flat[start : start + EMBED_BATCH])]
    vector.ensure_index(embedder.name, embedder.dimensions)
    stored, position = 0, 0
    for item, chunks in zip(items, chunked):
        rows = vectors[position : position + len(chunks)]
        position += len(chunks)
        value = list(map(float, rows[0])) if len(rows) == 1 else _pooled(embedder, rows)
        stored += Knowledge.objects.filter(pk=item.pk, task=item.task, content=item.content).update(
            embedding=value, embedding_model=embedder.name)
    return stored


def embed_later(*, knowledge_ids: list[str]) -> None:
    """Ask a worker to embed the item(s) (call on commit), EMBED_BATCH per task. The save never waits for the model.

    If the broker cannot take the message, nothing is lost: `embed_pending`, run
    by the worker every few seconds, embeds every item still without a vector.
    """
    for start in range(0, len(knowledge_ids), EMBED_BATCH):
        batch = knowledge_ids[start : start + EMBED_BATCH]
        try:
            _send_embedding(batch)
        except Exception as exc:  # noqa: BLE001 - the broker is down; the periodic sweep covers it
            logger.warning("could not queue embedding of %s (%s); the periodic sweep will embed it", ", ".join(batch), exc)
            return


_gathering = threading.local()


@contextmanager
def embeddings_gathered():
    """Inside this block (in a transaction), `embed_with_this_write` gathers the ids it is given, and the block's
    end asks for them together, EMBED_BATCH per message, instead of a message per write: for a writer that stores
    many items one by one in one transaction (an import's batch). An id whose savepoint rolled back is asked for
    too; its task finds nothing to embed (`embed_knowledge` reads only the stale items that exist). Nothing is
    sent when the block raises (its transaction is rolling back). A block inside another gathers into the outer."""
    if getattr(_gathering, "ids", None) is not None:
        yield
        return
    _gathering.ids = []
    try:
        yield
        gathered = list(dict.fromkeys(_gathering.ids))
    finally:
        _gathering.ids = None
    if gathered:
        embed_with_this_write(knowledge_ids=gathered)


def embed_with_this_write(*, knowledge_ids: list[str]) -> None:
    """Ask a worker to embed the item(s) written in the current transaction (call inside it).

    Where the broker is the application's own database (the default), the messages are written in this
    transaction (`core.outbox`): they reach the worker when the items commit and vanish if they roll back,
    without a commit of their own (one WAL flush per save, not two). A batch that cannot join (and every one
    after it) is sent after the commit instead, so no message is sent twice and the write does not fail for one;
    a database error, which leaves the transaction unusable, fails the write as any of its statements would.
    Elsewhere (Redis, RabbitMQ, another database) the messages are sent once the transaction commits (`embed_later`).
    """
    gathered = getattr(_gathering, "ids", None)
    if gathered is not None:
        gathered.extend(knowledge_ids)
        return
    rest = knowledge_ids
    if outbox.may_join_transactions():
        try:
            with outbox.joining_transaction():
                while rest:
                    _send_embedding(rest[:EMBED_BATCH])
                    rest = rest[EMBED_BATCH:]
            return
        except Exception as exc:  # noqa: BLE001 - nothing of this batch was sent: it goes after the commit
            if _database_error(exc):
                raise
            if not isinstance(exc, outbox.CannotJoin):
                logger.warning("could not queue embedding of %s in the write's transaction (%s); sending it after",
                               ", ".join(rest), exc)
    transaction.on_commit(lambda: embed_later(knowledge_ids=rest))


def _database_error(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, DatabaseError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _send_embedding(batch: list[str]) -> None:
    from knowledge.tasks import embed_knowledge

    embed_knowledge.delay(batch)


def vectors_pending(item: Knowledge) -> bool:
    """True while the item has no vector from the configured embedder (search finds it by keyword meanwhile)."""
    from django.conf import settings

    return item.embedding_model != settings.KNOWHUB_EMBEDDING_MODEL


def stale_items(model_name: str):
    """Items without a vector from `model_name`, oldest first (stable for resuming)."""
    # "another model" as two ranges, not `<>`, and no vector through a partial index: each condition has an index,
    # so the sweep (every 15 s) and /metrics read the few stale rows, not the whole table (~100 ms at 100k items)
    other_model = Q(embedding_model__lt=model_name) | Q(embedding_model__gt=model_name)
    return Knowledge.objects.filter(Q(embedding__isnull=True) | other_model).order_by("created_at", "id")


def embed_pending(*, limit: int = 512, batch_size: int = EMBED_BATCH) -> int:
    """Embed items still without a current vector (lost messages, earlier failures); returns how many.

    One sweep at a time (a PostgreSQL advisory lock): the worker's beat starts
    one every few seconds, and a slow one must not be joined by the next.
    """
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [EMBED_SWEEP_LOCK])
        if not cursor.fetchone()[0]:
            return 0
        try:
            embedder = get_embedder()
            done = 0
            while done < limit:
                batch = list(stale_items(embedder.name).only("id", "task", "content")[: min(batch_size, limit - done)])
                if not batch:
                    break
                if embed_items(items=batch, embedder=embedder):
                    from knowledge.tasks import detect_later

                    detect_later([item.id for item in batch])  # as after a save's own embedding message
                done += len(batch)
            return done
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [EMBED_SWEEP_LOCK])


EMBED_SWEEP_LOCK = 7_240_001  # any constant the project's other advisory locks do not use


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

