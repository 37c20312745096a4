"""Many new items at once: the bulk path for importers, bulk saves and benchmarks.

`knowledge_bulk_create` stores a batch in a few statements instead of a few
per item: the rows with their keyword documents computed in the same INSERT,
their resource links and feedback histories, in one transaction. Each item
is keyword-searchable on commit, as with a single save; its vector comes
from the worker (one task per EMBED_BATCH items) unless the caller already
has the vectors (an import that carries them, a benchmark's cache).

Entries are already validated (the API's serializer, an import's record
check): the service only enforces what needs the database (resource
visibility, the constraints).
"""
from collections import Counter
from collections.abc import Mapping, Sequence

from django.db import IntegrityError, transaction
from django.utils import timezone

from core import events
from knowledge.errors import KnowledgeIdConflictError
from knowledge.ids import new_knowledge_id
from knowledge.models import FeedbackCase, Knowledge, KnowledgeResource
from knowledge.search import indexing, keyword
from knowledge.search.embeddings import item_text
from knowledge.search.text import script_of
from knowledge.services import _is_primary_key_violation, check_new_item, normalize_source

INSERT_BATCH = 1_000
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
) -> list[Knowledge]:
    """Store `entries` (each holds `knowledge_create`'s keyword arguments) as new items, in order; returns them.

    As `caller` (agents.caller.Caller), who must be allowed to write every entry's scopes, and owns the
    entries that name no `owner`. All or nothing: an unknown resource or a taken `knowledge_id` rolls the
    whole batch back. With `vectors` (one per entry, from `model_name`) the
    items are stored with their embedding and no worker is asked.
    """
    if vectors is not None and len(vectors) != len(entries):
        raise ValueError("vectors must hold one vector per entry")
    now = timezone.now()
    items, links, cases = [], [], []
    for position, entry in enumerate(entries):
        resource_ids = list(dict.fromkeys(entry.get("resource_ids", ())))
        scopes = list(dict.fromkeys(entry["scopes"]))
        check_new_item(caller, scopes=scopes, resource_ids=resource_ids,
                       secure_resource_id=entry.get("secure_resource_id", ""))
        item = _new_item(entry, scopes=scopes, owner=entry.get("owner") or caller.principal, now=now)
        if vectors is not None:
            item.embedding = list(map(float, vectors[position]))
            item.embedding_model = model_name
        items.append(item)
        links.extend(KnowledgeResource(knowledge=item, resource_id=rid, position=i) for i, rid in enumerate(resource_ids))
        cases.extend(FeedbackCase(knowledge=item, kind=kind, case=dict(case))
                     for kind in ("helpful", "harmful") for case in entry.get(f"{kind}_history", ()))

    for start in range(0, len(items), INSERT_BATCH):
        _insert(items[start : start + INSERT_BATCH])
    KnowledgeResource.objects.bulk_create(links, batch_size=INSERT_BATCH)
    FeedbackCase.objects.bulk_create(cases, batch_size=INSERT_BATCH)
    for item in items:
        item.__dict__.pop("search_document", None)  # the expression it was inserted with; read back on access
    events.emit_all([events.event_new(events.KNOWLEDGE_CREATED, scopes=item.scopes,
                                      data=events.knowledge_data(item, by=caller.principal)) for item in items])
    if vectors is not None and items:
        indexing.vector.ensure_index(model_name, len(items[0].embedding))
    elif embed and items:
        ids = [item.id for item in items]
        transaction.on_commit(lambda: indexing.embed_later(knowledge_ids=ids))
    return items


def _new_item(entry: Mapping, *, scopes: list[str], owner: str, now) -> Knowledge:
    created_at = entry.get("created_at") or now
    task, content, tags = entry["task"], entry["content"], dict(entry.get("tags") or {})
    item = Knowledge(
        id=entry.get("knowledge_id") or "",
        message_id=entry.get("message_id", ""),
        secure_resource_id=entry.get("secure_resource_id", ""),
        types=list(dict.fromkeys(entry["types"])),
        task=task,
        content=content,
        tags=tags,
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
    # computed by PostgreSQL in the INSERT itself (keyword.document_expression, the same as a single save)
    item.search_document = keyword.document_expression(task=task, content=content, tags=tags)
    return item


def _insert(batch: list[Knowledge]) -> None:
    """INSERT the batch, drawing fresh random ids for the items without one if any collides."""
    chosen = {id(item) for item in batch if item.id}
    for _ in range(ID_ATTEMPTS):
        for item in batch:
            if id(item) not in chosen:
                item.id = new_knowledge_id(now=item.created_at, suffix_length=BULK_SUFFIX_LENGTH)
        try:
            with transaction.atomic():
                Knowledge.objects.bulk_create(batch)
            return
        except IntegrityError as exc:
            if not _is_primary_key_violation(exc):
                raise
            taken = _taken([item.id for item in batch if id(item) in chosen])
            if taken:  # a caller's id: refused, not redrawn
                raise KnowledgeIdConflictError(taken[0]) from exc
    raise IntegrityError("could not draw unique knowledge ids")


def _taken(given: list[str]) -> list[str]:
    """The given ids that are stored already, or given twice in the batch."""
    twice = [item_id for item_id, n in Counter(given).items() if n > 1]
    return list(Knowledge.objects.filter(pk__in=given).values_list("id", flat=True)) or twice
