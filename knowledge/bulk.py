"""Many new items at once: the bulk path for importers, bulk saves and benchmarks.

`knowledge_bulk_create` stores a batch in a few statements instead of a few
per item: the rows with their keyword documents computed in the same INSERT,
their resource links and feedback histories, in one transaction. Each item
is keyword-searchable on commit, as with a single save; its vector comes
from the worker (one task per EMBED_BATCH items) unless the caller already
has the vectors (an import that carries them, a benchmark's cache).

Entries are already validated (the API's serializer, an import's record
check): the service enforces what needs the caller or the database, once per
entry: `services.check_new_item` (the caller's write access, resource
visibility) and the constraints.
"""
import json
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor, wait
from collections.abc import Callable, Mapping, Sequence

from django.db import IntegrityError, connection, connections, transaction
from django.utils import timezone
from rest_framework.exceptions import PermissionDenied

from core import events
from core.errors import DomainError
from knowledge.errors import KnowledgeIdConflictError
from knowledge.ids import new_knowledge_id
from knowledge.models import FeedbackCase, Knowledge, KnowledgeResource
from knowledge.search import indexing, keyword
from knowledge.search.embeddings import item_text
from knowledge.search.text import script_of
from knowledge.search.vector import vector_literal
from knowledge.services import _is_primary_key_violation, check_new_item, normalize_source

INSERT_BATCH = 125  # items an INSERT stores; the next batch's records are built while it runs
ROWS_BATCH = 1_000  # resource links and feedback cases a bulk_create stores
# Longer random suffixes than a single save's: a day's bulk import of 100k
# items in four characters (1.7M ids) would collide thousands of times.
BULK_SUFFIX_LENGTH = 8
ID_ATTEMPTS = 3


@transaction.atomic
def knowledge_bulk_create(
    caller,
    entries: Sequence[Mapping],
    *,
    vectors: Sequence | None = None,
    model_name: str = "",
    embed: bool = True,
    refused: Callable[[int, Exception], None] | None = None,
) -> list[Knowledge]:
    """Store `entries` (each holds `knowledge_create`'s keyword arguments) as new items, in order; returns them.

    As `caller` (agents.caller.Caller), who must be allowed to write every entry's scopes, and owns the
    entries that name no `owner`. All or nothing: an entry `check_new_item` refuses (PermissionDenied,
    UnknownResourceError, ResourceScopeError) or a taken `knowledge_id` rolls the whole batch back. With
    `refused`, a refused entry is left out instead and `refused(position, error)` told, and the others are
    stored (the bulk save reports each refusal at its index). With `vectors` (one per entry, from
    `model_name`) the items are stored with their embedding and no worker is asked.
    """
    if vectors is not None and len(vectors) != len(entries):
        raise ValueError("vectors must hold one vector per entry")
    now = timezone.now()
    items, links, cases = [], [], []
    for position, entry in enumerate(entries):
        resource_ids = list(dict.fromkeys(entry.get("resource_ids", ())))
        scopes = list(dict.fromkeys(entry["scopes"]))
        try:
            check_new_item(caller, scopes=scopes, resource_ids=resource_ids,
                           secure_resource_id=entry.get("secure_resource_id", ""))
        except (PermissionDenied, DomainError) as exc:
            if refused is None:
                raise
            refused(position, exc)
            continue
        item = _new_item(entry, scopes=scopes, owner=entry.get("owner") or caller.principal, now=now)
        if vectors is not None:
            item.embedding = list(map(float, vectors[position]))
            item.embedding_model = model_name
        items.append(item)
        links.extend(KnowledgeResource(knowledge=item, resource_id=rid, position=i) for i, rid in enumerate(resource_ids))
        cases.extend(FeedbackCase(knowledge=item, kind=kind, case=dict(case))
                     for kind in ("helpful", "harmful") for case in entry.get(f"{kind}_history", ()))

    _insert_all(items)
    KnowledgeResource.objects.bulk_create(links, batch_size=ROWS_BATCH)
    FeedbackCase.objects.bulk_create(cases, batch_size=ROWS_BATCH)
    events.emit_all([events.event_new(events.KNOWLEDGE_CREATED, scopes=item.scopes,
                                      data=events.knowledge_data(item, by=caller.principal)) for item in items])
    if vectors is not None and items:
        indexing.vector.ensure_index(model_name, len(items[0].embedding))
    elif embed and items:
        indexing.embed_with_this_write(knowledge_ids=[item.id for item in items])
    return items


def _new_item(entry: Mapping, *, scopes: list[str], owner: str, now) -> Knowledge:
    created_at = entry.get("created_at") or now
    task, content = entry["task"], entry["content"]
    item = Knowledge(
        id=entry.get("knowledge_id") or "",
        message_id=entry.get("message_id", ""),
        secure_resource_id=entry.get("secure_resource_id", ""),
        types=list(dict.fromkeys(entry["types"])),
        task=task,
        content=content,
        tags=dict(entry.get("tags") or {}),
        scopes=scopes,
        owner=owner,
        source=normalize_source(entry.get("source"), now=created_at),
        score=entry.get("score", 3),
        helpful=entry.get("helpful", 0),
        harmful=entry.get("harmful", 0),
        confidence=entry.get("confidence", 0.5),
        created_at=created_at,
        updated_at=entry.get("updated_at") or created_at,
        script=script_of(item_text(task, content)),
    )
    del item.search_document  # computed by PostgreSQL in the INSERT (keyword.DOCUMENT_SQL); read back on access
    return item


# One INSERT … SELECT over a JSON array of records (json_to_recordset) instead of a VALUES row of ~20
# parameters per item: Django's client-side binding quotes one string instead of thousands of values, no
# expressions are compiled per item, and the keyword document is SQL over the record's columns
# (keyword.DOCUMENT_SQL, what a single save runs). Columns left out (merged_into, superseded_by) are NULL,
# as a new item's are.
_RECORD = (  # column, its type in the record, the value stored from the record r
    ("id", "text", "r.id"),
    ("message_id", "text", "r.message_id"),
    ("types", "text[]", "r.types"),
    ("task", "text", "r.task"),
    ("content", "text", "r.content"),
    ("tags", "jsonb", "r.tags"),
    ("scopes", "text[]", "r.scopes"),
    ("owner", "text", "r.owner"),
    ("source", "jsonb", "r.source"),
    ("secure_resource_id", "text", "r.secure_resource_id"),
    ("score", "bigint", "r.score"),
    ("helpful", "bigint", "r.helpful"),
    ("harmful", "bigint", "r.harmful"),
    ("confidence", "float8", "r.confidence"),
    ("status", "text", "r.status"),
    ("embedding", "text", "r.embedding::vector"),
    ("embedding_model", "text", "r.embedding_model"),
    ("script", "text", "r.script"),
    ("created_at", "timestamptz", "r.created_at"),
    ("updated_at", "timestamptz", "r.updated_at"),
)
_PARTS = (("seg_task", "text"), ("seg_content", "text"), ("seg_tags", "text"), ("names", "text[]"))
_INSERT_SQL = (
    f"INSERT INTO {Knowledge._meta.db_table} ({', '.join(c for c, _, _ in _RECORD)}, search_document) "
    f"SELECT {', '.join(v for _, _, v in _RECORD)}, "
    + keyword.DOCUMENT_SQL.format(task="r.seg_task", content="r.seg_content", tags="r.seg_tags", names="r.names")
    + " FROM json_to_recordset(%s::json) AS r("
    + ", ".join(f"{c} {t}" for c, t, _ in _RECORD) + ", " + ", ".join(f"{p} {t}" for p, t in _PARTS) + ")"
)


def _records(batch: list[Knowledge]) -> list[dict]:
    """The items as the INSERT's records: values converted as Django converts them for these fields
    (`get_db_prep_save`'s work, done in bulk: numbers by int() and float(), vectors as pgvector's text (`vector.vector_literal`),
    aware datetimes), with the keyword document's parts (_PARTS), the batch's texts segmented together."""
    created_at, updated_at = Knowledge._meta.get_field("created_at"), Knowledge._meta.get_field("updated_at")
    records = []
    documents = keyword.document_parts_many([(item.task, item.content, item.tags) for item in batch])
    for item, parts in zip(batch, documents):
        records.append({
            "id": item.id, "message_id": item.message_id, "types": item.types, "task": item.task,
            "content": item.content, "tags": item.tags, "scopes": item.scopes, "owner": item.owner,
            "source": item.source, "secure_resource_id": item.secure_resource_id, "score": int(item.score),
            "helpful": int(item.helpful), "harmful": int(item.harmful), "confidence": float(item.confidence),
            "status": item.status, "embedding": None if item.embedding is None else vector_literal(item.embedding), "embedding_model": item.embedding_model,
            "script": item.script,
            "created_at": created_at.get_db_prep_save(item.created_at, connection).isoformat(),
            "updated_at": updated_at.get_db_prep_save(item.updated_at, connection).isoformat(),
            **dict(zip((name for name, _ in _PARTS), parts)),
        })
    return records


def _insert_all(items: list[Knowledge]) -> None:
    """INSERT the items INSERT_BATCH at a time; each batch's records (its texts segmented, in Python) are built
    while the previous batch's INSERT runs in PostgreSQL (its keyword documents, its indexes), on a thread that
    shares this connection, so the two run on two cores instead of one after the other. The connection is used by
    one thread at a time: the INSERT's thread while this one builds records, never both with it."""
    batches = [items[start : start + INSERT_BATCH] for start in range(0, len(items), INSERT_BATCH)]
    if len(batches) < 2:
        for batch in batches:
            _insert(batch)
        return
    shared = connections[connection.alias]  # this thread's connection itself: `connection` names another's in another
    shared.ensure_connection()
    shared.inc_thread_sharing()
    beside = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bulk-insert")
    pending = None  # the started INSERT not yet finished (`_finish` rolls its own failures back)
    try:
        for batch in batches:
            records = _records(batch)
            if pending is not None:
                started, pending = pending, None
                _finish(*started)
            pending = _start(beside, shared, batch, records)
        started, pending = pending, None
        _finish(*started)
    finally:
        if pending is not None:  # building records failed while an INSERT ran: let it end before the rollback
            wait([pending[0]])
            transaction.savepoint_rollback(pending[1])
        beside.shutdown()
        shared.dec_thread_sharing()


def _start(beside: ThreadPoolExecutor, shared, batch: list[Knowledge], records: list[dict]) -> tuple:
    """A savepoint, then the batch's INSERT (its first ids drawn) started on the `beside` thread, on `shared`."""
    chosen = {id(item) for item in batch if item.id}
    _draw_ids(batch, records, chosen=chosen)
    savepoint = transaction.savepoint()
    return beside.submit(_execute, shared, [json.dumps(records, ensure_ascii=False)]), savepoint, batch, records, chosen


def _finish(future: Future, savepoint: str, batch: list[Knowledge], records: list[dict], chosen: set[int]) -> None:
    """Wait for a started INSERT; on a taken id, back to its savepoint and through `_insert`'s own retries."""
    try:
        future.result()
    except IntegrityError as exc:
        transaction.savepoint_rollback(savepoint)
        if not _is_primary_key_violation(exc):
            raise
        _insert(batch, records, chosen=chosen)
    except BaseException:
        transaction.savepoint_rollback(savepoint)
        raise
    else:
        transaction.savepoint_commit(savepoint)
        _mark_stored(batch)


def _execute(conn, params: list) -> None:
    with conn.cursor() as cursor:
        cursor.execute(_INSERT_SQL, params)


def _draw_ids(batch: list[Knowledge], records: list[dict], *, chosen: set[int]) -> None:
    """New random ids for the items not in `chosen` (ids of items whose caller chose theirs), into their records."""
    for item in batch:
        if id(item) not in chosen:
            item.id = new_knowledge_id(now=item.created_at, suffix_length=BULK_SUFFIX_LENGTH)
    for record, item in zip(records, batch):
        record["id"] = item.id


def _mark_stored(batch: list[Knowledge]) -> None:
    for item in batch:
        item._state.adding, item._state.db = False, connection.alias


def _insert(batch: list[Knowledge], records: list[dict] | None = None, *, chosen: set[int] | None = None) -> None:
    """INSERT the batch, drawing fresh random ids for the items without one (not in `chosen`) if any collides."""
    chosen = {id(item) for item in batch if item.id} if chosen is None else chosen
    records = _records(batch) if records is None else records
    for _ in range(ID_ATTEMPTS):
        _draw_ids(batch, records, chosen=chosen)
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(_INSERT_SQL, [json.dumps(records, ensure_ascii=False)])
        except IntegrityError as exc:
            if not _is_primary_key_violation(exc):
                raise
            taken = _taken([item.id for item in batch if id(item) in chosen])
            if taken:  # a caller's id: refused, not redrawn
                raise KnowledgeIdConflictError(taken[0]) from exc
        else:
            _mark_stored(batch)
            return
    raise IntegrityError("could not draw unique knowledge ids")


def _taken(given: list[str]) -> list[str]:
    """The given ids that are stored already, or given twice in the batch."""
    twice = [item_id for item_id, n in Counter(given).items() if n > 1]
    return list(Knowledge.objects.filter(pk__in=given).values_list("id", flat=True)) or twice
