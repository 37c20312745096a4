"""Restoring exported knowledge exactly (ingest.importer): ids, timestamps, counters, feedback histories with
their reporters, versions with who changed them and why, merge links and vectors.

`knowledge_restore` stores one item as `knowledge_create` would (the caller's write check, linked resources
readable, keyword index), then its history rows as they were; `knowledge_restore_links` sets the status
and merge links once every item of the export is stored (a merged item points at one stored later), each only
when it keeps the rules the API's own supersede and merge keep (`supersede.check_supersede`, `slim.scopes_differ`).
"""
from collections.abc import Mapping

from django.db import transaction
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _
from rest_framework.exceptions import PermissionDenied

from knowledge import services, slim, supersede
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
    if keep_vector:
        ensure_index(vector_model, len(vector))
    item = services.knowledge_create(
        caller, knowledge_id=record["id"], task=record["task"], content=record["content"], types=record["types"],
        scopes=record["scopes"], owner=record.get("owner") or None, tags=record.get("tags") or {},
        source=record.get("source") or {}, message_id=record.get("message_id", ""),
        resource_ids=record.get("resource_ids") or (), secure_resource_id=record.get("secure_resource_id", ""),
        score=record.get("score", 3), helpful=record.get("helpful", 0), harmful=record.get("harmful", 0),
        confidence=record.get("confidence", 0.5), created_at=_when(record.get("created_at")),
        updated_at=_when(record.get("updated_at")), embedding=vector if keep_vector else None,
        embedding_model=vector_model,
    )
    FeedbackCase.objects.bulk_create(
        FeedbackCase(knowledge=item, kind=c["kind"], case=c.get("case") or {}, reported_by=c.get("reported_by", ""),
                     created_at=_when(c.get("created_at")) or item.created_at) for c in feedback)
    KnowledgeVersion.objects.bulk_create(
        KnowledgeVersion(knowledge=item, number=v["number"], task=v["task"], content=v["content"], tags=v.get("tags") or {},
                         changed_by=v.get("changed_by", ""), reason=v.get("reason", ""),
                         created_at=_when(v.get("created_at")) or item.created_at)
        for v in record.get("versions") or [])
    item.histories_complete = False  # its cases were stored after knowledge_create: a reply reads them from the rows
    return item


def knowledge_restore_links(caller, records: list[Mapping]) -> list[tuple[Mapping, str]]:
    """The status and merge link of each restored item, once every item of the export is stored; each in its
    own savepoint. A link is made only as the API would make it: to an item here that `caller` can read, and
    keeping the rules of its operations (`link_problem`); otherwise the item keeps its status only if that needs
    no link, and the (record, problem) pairs say what was left out."""
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
            if links:
                [(field, target)] = links.items()
                problem = link_problem(caller, record["id"], field, target)
                if problem:
                    problems.append((record, f"{field}: {problem}: the item stays active"))
                    continue
            Knowledge.objects.filter(pk=record["id"]).update(
                status=status, merged_into_id=links.get("merged_into"), superseded_by_id=links.get("superseded_by"))
    return problems


def link_problem(caller, item_id: str, field: str, target_id: str) -> str | None:
    """Why the restored item `item_id` may not be `field` (superseded_by, merged_into) `target_id`, by the rules the
    API's operations hold, or None. Both are locked (in id order) until the savepoint ends.

    Superseded: `supersede.check_supersede`, as `knowledge_supersede` holds it (never itself, both writable by
    `caller`, the successor read wherever the item is read), but for the statuses: the link was made when both
    were active, and a successor may since have been superseded, merged or archived. Merged: within the scopes
    `caller` may write (the merged item writable, as a merge's originals are) and into an item of the very same
    scopes (`slim.scopes_differ`), never into itself. Neither link may lead back to the item (a circle of links,
    which no operation can make)."""
    locked = services.lock_items([item_id, target_id])
    item, target = locked[item_id], locked[target_id]
    try:
        if field == "superseded_by":
            supersede.check_supersede(caller, item, target, statuses=False)
        else:
            if item.id == target.id:
                return _("an item cannot be merged into itself")
            services.require_write_any(caller, target)
            if problem := slim.scopes_differ([item, target]):
                return problem
    except (KnowledgeStateError, PermissionDenied) as exc:
        return str(getattr(exc, "detail", None) or exc)
    if _leads_back(target, item.id):
        return _("%(target)s leads back to %(id)s: the links would go round in a circle") % {
            "target": target.id, "id": item.id}
    return None


def _leads_back(start: Knowledge, item_id: str) -> bool:
    """Whether following `start`'s links (the item it is merged into or superseded by, and on) reaches `item_id`."""
    seen, step = set(), start.merged_into_id or start.superseded_by_id
    while step and step not in seen:
        if step == item_id:
            return True
        seen.add(step)
        links = Knowledge.objects.filter(pk=step).values_list("merged_into_id", "superseded_by_id").first()
        step = (links[0] or links[1]) if links else None
    return False


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
