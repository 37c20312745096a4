"""Restoring exported knowledge exactly (ingest.importer): ids, timestamps, counters, feedback histories with
their reporters, versions with who changed them and why, merge links and vectors.

`knowledge_restore` stores one item as `knowledge_create` would (the caller's write check, linked resources
readable, keyword index), then its history rows as they were; `knowledge_restore_links` sets the status
and merge links once every item of the export is stored (a merged item points at one stored later).
"""
from collections.abc import Mapping

from django.db import transaction
from django.utils.dateparse import parse_datetime

from knowledge import services
from knowledge.errors import KnowledgeStateError
from knowledge.models import FeedbackCase, Knowledge, KnowledgeStatus, KnowledgeVersion, SlimRejection
from knowledge.search.vector import ensure_index

def _when(value):
    return parse_datetime(value) if value else None


def fingerprint(record: Mapping) -> tuple:
    """What an item says (its text, tags and types): equal fingerprints mean an import has nothing to change."""
    return (record["task"], record["content"], dict(record.get("tags") or {}), list(record["types"]))


@transaction.atomic
def knowledge_restore(caller, record: Mapping, *, vector_model: str) -> Knowledge:
    """Store the exported item `record` with its history. Its vector is kept when it comes from `vector_model`
    (the hub's embedder); otherwise the worker embeds the text again."""
    feedback = record.get("feedback") or []
    vector = record.get("embedding")
    keep_vector = bool(vector) and record.get("embedding_model") == vector_model
    item = services.knowledge_create(
        caller, knowledge_id=record["id"], task=record["task"], content=record["content"], types=record["types"],
        scopes=record["scopes"], owner=record.get("owner") or None, tags=record.get("tags") or {},
        source=record.get("source") or {}, message_id=record.get("message_id", ""),
        resource_ids=record.get("resource_ids") or (), secure_resource_id=record.get("secure_resource_id", ""),
        score=record.get("score", 3), helpful=record.get("helpful", 0), harmful=record.get("harmful", 0),
        confidence=record.get("confidence", 0.5), created_at=_when(record.get("created_at")),
        updated_at=_when(record.get("updated_at")), embed=not keep_vector,
    )
    FeedbackCase.objects.bulk_create(
        FeedbackCase(knowledge=item, kind=c["kind"], case=c.get("case") or {}, reported_by=c.get("reported_by", ""),
                     created_at=_when(c.get("created_at")) or item.created_at) for c in feedback)
    KnowledgeVersion.objects.bulk_create(
        KnowledgeVersion(knowledge=item, number=v["number"], task=v["task"], content=v["content"], tags=v.get("tags") or {},
                         changed_by=v.get("changed_by", ""), reason=v.get("reason", ""),
                         created_at=_when(v.get("created_at")) or item.created_at)
        for v in record.get("versions") or [])
    if keep_vector:
        ensure_index(vector_model, len(vector))
        Knowledge.objects.filter(pk=item.pk).update(embedding=vector, embedding_model=vector_model)
        item.embedding_model = vector_model
    item.histories_complete = False  # its cases were stored after knowledge_create: a reply reads them from the rows
    return item


def knowledge_restore_links(caller, records: list[Mapping]) -> list[tuple[Mapping, str]]:
    """The status and merge link of each restored item, once every item of the export is stored; each in its
    own savepoint. A link to an item that is not here (or that `caller` cannot read) is not made: the item
    keeps its status only if that needs no link, and the (record, problem) pairs say what was left out."""
    problems = []
    visible = Knowledge.objects.visible_to(caller)
    linked = {KnowledgeStatus.MERGED: "merged_into", KnowledgeStatus.SUPERSEDED: "superseded_by"}
    for record in records:
        status = record.get("status") or KnowledgeStatus.ACTIVE
        links = {field: record.get(field) for field in linked.values() if record.get(field)}
        if status == KnowledgeStatus.ACTIVE and not links:
            continue
        unseen = [f"{field}: {target} is not in this hub (or not readable): the item stays active"
                  for field, target in links.items() if not visible.filter(pk=target).exists()]
        if unseen:
            problems.append((record, unseen[0]))
            continue
        if set(links) != ({linked[status]} if status in linked else set()):
            problems.append((record, f"status: {status!r} with {links or 'no link'} do not go together"))
            continue
        with transaction.atomic():
            Knowledge.objects.filter(pk=record["id"]).update(
                status=status, merged_into_id=links.get("merged_into"), superseded_by_id=links.get("superseded_by"))
    return problems


def slim_rejection_restore(caller, *, first: str, second: str, rejected_by: str, created_at=None) -> bool:
    """A rejected merge pair; False when it was known already. KnowledgeStateError when either item is not here
    (or not readable by `caller`)."""
    if Knowledge.objects.visible_to(caller).filter(pk__in=[first, second]).count() != len({first, second}):
        raise KnowledgeStateError("the pair names an item that is not in this hub", field="first")
    _, created = SlimRejection.objects.get_or_create(
        first_id=min(first, second), second_id=max(first, second),
        defaults={"rejected_by": rejected_by, **({"created_at": _when(created_at)} if created_at else {})})
    return created


def knowledge_update_text(caller, *, knowledge_id: str, record: Mapping, reason: str) -> bool:
    """Bring an existing item's text, tags and types to `record`'s, the old text kept as a version; False when
    they already match."""
    item = Knowledge.objects.get(pk=knowledge_id)
    if fingerprint({"task": item.task, "content": item.content, "tags": item.tags, "types": item.types}) == fingerprint(record):
        return False
    services.knowledge_edit(caller, knowledge_id=knowledge_id, reason=reason,
                            **{name: record[name] for name in services.TEXT_FIELDS if name in record})
    return True
