"""Supersede instead of delete: an item replaced by a better one leaves search but is kept, linked to its successor.

`knowledge_supersede` marks the older item `superseded` with `superseded_by`; search and the list skip it unless
asked (`include_superseded`), and the successor lists what it replaced (`supersedes`). Making it active again
(`knowledge_unsupersede`, the `knowledge_activate` operation) reverses it, and reopens the conflict whose review made
that decision, as undoing a merge reopens the conflict the merge settled (`slim.knowledge_unmerge`).
"""
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from core import events
from knowledge.errors import KnowledgeStateError
from knowledge.models import Conflict, Knowledge, KnowledgeStatus
from knowledge.services import lock_items, require_write_any


@transaction.atomic
def knowledge_supersede(caller, *, knowledge_id: str, successor_id: str) -> Knowledge:
    """Mark `knowledge_id` superseded by `successor_id`. Both must be active and writable by `caller`
    (PermissionDenied); KnowledgeStateError otherwise."""
    if knowledge_id == successor_id:
        raise KnowledgeStateError(_("an item cannot supersede itself"), field="successor_id")
    locked = lock_items([knowledge_id, successor_id])
    item, successor = locked[knowledge_id], locked[successor_id]  # KeyError: the caller checked both exist
    check_supersede(caller, item, successor)
    item.status, item.superseded_by, item.updated_at = KnowledgeStatus.SUPERSEDED, successor, timezone.now()
    item.save(update_fields=["status", "superseded_by", "updated_at"])
    events.emit(events.KNOWLEDGE_SUPERSEDED, scopes=item.scopes,
                data=events.knowledge_data(item, superseded_by=successor.id, by=caller.principal))
    return item


def check_supersede(caller, item: Knowledge, successor: Knowledge, *, statuses: bool = True) -> None:
    """The rules for `successor` superseding `item`: never itself, both writable by `caller` (PermissionDenied),
    both active (unless `statuses` is False: an import restoring a link made when they were), and the successor
    read wherever the item is read (KnowledgeStateError)."""
    if item.id == successor.id:
        raise KnowledgeStateError(_("an item cannot supersede itself"), field="successor_id")
    require_write_any(caller, item)
    require_write_any(caller, successor)
    if statuses and item.status != KnowledgeStatus.ACTIVE:
        raise KnowledgeStateError(_("%(id)s is %(status)s; only an active item is superseded") % {"id": item.id, "status": item.status},
                                  field="knowledge_id")
    if statuses and successor.status != KnowledgeStatus.ACTIVE:
        raise KnowledgeStateError(_("%(id)s is %(status)s; the successor must be active")
                                  % {"id": successor.id, "status": successor.status}, field="successor_id")
    unreached = sorted(set(item.scopes) - set(successor.scopes))
    if unreached:  # its readers there would lose the item and could not read what replaced it
        raise KnowledgeStateError(_("%(successor)s is not in %(scopes)s, where %(id)s is read: a successor must be readable "
                                    "by everyone who reads the item it replaces")
                                  % {"successor": successor.id, "scopes": ", ".join(unreached), "id": item.id},
                                  field="successor_id")


@transaction.atomic
def knowledge_unsupersede(caller, *, knowledge_id: str) -> Knowledge:
    """Make a superseded item active again (its successor stays as it is). A conflict settled by superseding it by
    that successor is open again: the pair is back, for a person to judge (`conflicts.conflict_reopen` reverses the
    same decision from the conflict's side, and un-supersedes only an item its successor still supersedes)."""
    item = Knowledge.objects.select_for_update().get(pk=knowledge_id)
    require_write_any(caller, item)
    if item.status != KnowledgeStatus.SUPERSEDED:
        raise KnowledgeStateError(_("%(id)s is %(status)s, not superseded") % {"id": item.id, "status": item.status},
                                  field="knowledge_id")
    successor_id = item.superseded_by_id
    item.status, item.superseded_by, item.updated_at = KnowledgeStatus.ACTIVE, None, timezone.now()
    item.save(update_fields=["status", "superseded_by", "updated_at"])
    # after the item's lock, as every writer takes an item before its conflict (`conflicts.conflict_resolve`)
    Conflict.objects.filter(status=Conflict.Status.SUPERSEDED, resolution__superseded=item.id,
                            resolution__successor=successor_id).update(
        status=Conflict.Status.OPEN, resolution={}, resolved_by="", resolved_at=None, updated_at=item.updated_at)
    events.emit(events.KNOWLEDGE_UPDATED, scopes=item.scopes,
                data=events.knowledge_data(item, changed=["status"], reason="no longer superseded", by=caller.principal))
    return item
