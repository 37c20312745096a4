"""Contradiction and overlap detection, and a person's review of what it finds (issue 17).

After an item is saved or edited and its vector stored, `detect_for` (the `detect_conflicts` task) takes its
close items in the scopes it shares (`knowledge.neighbours.close_pairs`: vector and keyword neighbours, so
paraphrases and translations are found) and, with an LLM configured, has each close pair judged as duplicate,
refinement, contradiction or unrelated (structured output). Anything but unrelated becomes a `Conflict` to
review; a duplicate pair in the same scopes also gets a stored merge proposal (the merge review). Without an
LLM every close pair is recorded as `close`, for a person to judge. A pair has one record, whatever becomes of
it: dismissed or kept pairs are never raised again.

Review actions (`conflict_resolve`): keep both, supersede (the older item, or the one named, becomes
`superseded` by the other), merge (through slim's merge path), dismiss. `conflict_reopen` reverses any of them.
"""
import logging

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from core import events
from core.safe_json import UNSAFE_CHARACTERS
from knowledge import llm, services, slim
from knowledge.relation import judge
from knowledge.errors import KnowledgeStateError
from knowledge.models import Conflict, Knowledge, KnowledgeStatus, MergeProposal, SlimRejection
from knowledge.neighbours import close_pairs
from knowledge.supersede import knowledge_supersede, knowledge_unsupersede

logger = logging.getLogger(__name__)

MAX_JUDGED_PER_SAVE = 5  # the LLM calls one save may cost at most
ACTIONS = ["keep_both", "supersede", "merge", "dismiss"]


def _ordered(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def _audience(item: Knowledge):
    """The active items sharing a scope with `item` (item included): the base its keyword neighbours are weighed in."""
    return Knowledge.objects.filter(status=KnowledgeStatus.ACTIVE, scopes__overlap=item.scopes)


def _candidates(item: Knowledge):
    others = _audience(item).exclude(pk=item.pk)
    document = (item.source or {}).get("document") or {}
    if document.get("uri"):  # a document's own chunks do not contradict each other
        others = others.exclude(source__document__uri=document["uri"])
    return others


def detect_for(*, knowledge_ids: list[str]) -> list[Conflict]:
    """Find and record the conflicts of each active, embedded item of `knowledge_ids`. Returns those raised
    (new records) or re-judged (open ones, after an edit)."""
    if not settings.KNOWHUB_CONFLICT_DETECTION:
        return []
    raised = []
    for item in Knowledge.objects.filter(pk__in=knowledge_ids, status=KnowledgeStatus.ACTIVE, embedding__isnull=False):
        raised += _detect(item)
    return raised


def _detect(item: Knowledge) -> list[Conflict]:
    pairs = close_pairs(item, _candidates(item), audience=_audience(item))
    known = {(c.first_id, c.second_id): c for c in Conflict.objects.filter(Q(first=item) | Q(second=item))}

    def judged_already(pair) -> bool:
        # a settled pair is never raised again; an open one is judged again only when this item changed since
        conflict = known.get(_ordered(item.id, pair.other_id))
        return conflict is not None and (conflict.status != Conflict.Status.OPEN or conflict.updated_at >= item.updated_at)

    pairs = [p for p in pairs if not judged_already(p)][:MAX_JUDGED_PER_SAVE]
    others = Knowledge.objects.in_bulk([p.other_id for p in pairs])
    judged = llm.llm_configured()
    raised = []
    for pair in pairs:
        other = others.get(pair.other_id)
        if other is None:  # deleted since its pair was found (an admin, a purge): nothing to record
            continue
        kind, explanation, model = Conflict.Kind.CLOSE, "", ""
        if judged:
            try:
                verdict = judge(item, other)
                kind, explanation, model = verdict["relation"], verdict["explanation"], settings.KNOWHUB_LLM_MODEL
            except llm.LLMError as exc:  # left for a person rather than lost
                logger.warning("could not judge %s / %s: %s", item.id, other.id, exc)
                explanation = UNSAFE_CHARACTERS.sub("\ufffd", f"the LLM could not judge this pair ({str(exc)[:300]})")
        if kind == "unrelated":
            Conflict.objects.filter(first_id=_ordered(item.id, other.id)[0], second_id=_ordered(item.id, other.id)[1],
                                    status=Conflict.Status.OPEN).delete()  # an edit made an open pair unrelated
            continue
        conflict = _record(item, other, kind=kind, explanation=explanation, model=model, similarity=pair.similarity)
        if conflict is None:
            continue
        raised.append(conflict)
        if kind == Conflict.Kind.DUPLICATE and sorted(item.scopes) == sorted(other.scopes):
            _propose_merge(conflict, [item, other])
    return raised


def _record(item, other, *, kind, explanation, model, similarity) -> Conflict | None:
    """The pair's conflict, recorded or brought up to date; None when one of the two was deleted meanwhile."""
    first, second = _ordered(item.id, other.id)
    values = {"kind": kind, "explanation": explanation, "model": model, "similarity": similarity, "detected_for": item.id}
    try:
        with transaction.atomic():
            conflict, created = Conflict.objects.update_or_create(
                first_id=first, second_id=second, defaults={**values, "updated_at": timezone.now()}, create_defaults=values)
    except IntegrityError:
        # the other item's detection, in another worker, recorded the pair a moment ago; or (no such record) one
        # of the two items was deleted while this was judged, and its foreign key refused the record
        return Conflict.objects.filter(first_id=first, second_id=second).first()
    if created:
        events.emit(events.CONFLICT_RAISED, scopes=sorted(set(item.scopes) & set(other.scopes)), data={
            "conflict_id": conflict.id, "kind": kind, "first_id": first, "second_id": second,
            "detected_for": item.id, "explanation": explanation[:300]})
    return conflict


def _propose_merge(conflict: Conflict, items: list[Knowledge]) -> None:
    first, second = sorted(k.id for k in items)
    if SlimRejection.objects.filter(first_id=first, second_id=second).exists():
        return
    try:
        text = slim.propose_merge(sorted(items, key=lambda k: (k.created_at, k.id)), model=None)
    except llm.LLMError as exc:
        logger.warning("no merge text for %s / %s: %s", first, second, exc)
        return
    slim.store_proposal([first, second], text, conflict=conflict)


def open_conflicts_of(ids: list[str], *, visible) -> dict[str, list[dict]]:
    """For each of `ids`, its open conflicts other than duplicates ({conflict_id, kind, with}) whose other item is
    in `visible` (a queryset of the items the caller may read): what a search hit warns an agent about."""
    found: dict[str, list[dict]] = {}
    rows = (Conflict.objects.filter(Q(first_id__in=ids) | Q(second_id__in=ids), status=Conflict.Status.OPEN)
            .exclude(kind=Conflict.Kind.DUPLICATE).values_list("id", "kind", "first_id", "second_id"))
    rows = list(rows)
    others = set(visible.filter(pk__in={i for _, _, a, b in rows for i in (a, b)}, status=KnowledgeStatus.ACTIVE)
                 .values_list("id", flat=True))  # a pair whose other item left (archived, merged, superseded) is moot
    for conflict_id, kind, first, second in rows:
        for this, other in ((first, second), (second, first)):
            if this in ids and other in others:
                found.setdefault(this, []).append({"conflict_id": conflict_id, "kind": kind, "with": other})
    return found


# --- review -------------------------------------------------------------------------------------------


@transaction.atomic
def conflict_resolve(caller, *, conflict_id: int, action: str, successor_id: str | None = None,
                     task: str | None = None, content: str | None = None) -> Conflict:
    """Settle an open conflict as `caller` (who must be allowed to write both items: the operation checks).

    supersede: `successor_id` (one of the pair; default the newer item) supersedes the other.
    merge: one new item with `task`/`content`, or the pair's pending proposal's text.
    Raises KnowledgeStateError when the conflict is not open or the items are no longer active.
    """
    conflict = Conflict.objects.get(pk=conflict_id)
    pair = [conflict.first_id, conflict.second_id]
    locked = services.lock_items(pair)  # the items first, as every writer of several items takes them; then the conflict
    conflict = Conflict.objects.select_for_update().get(pk=conflict_id)
    if conflict.status != Conflict.Status.OPEN:
        raise KnowledgeStateError(_("conflict %(id)s is already %(status)s; reopen it first")
                                  % {"id": conflict.id, "status": conflict.status}, field="action")
    resolution = {}
    if action == "supersede":
        items = Knowledge.objects.in_bulk(pair)
        if successor_id is None:
            successor_id = max(items.values(), key=lambda k: (k.created_at, k.id)).id
        if successor_id not in pair:
            raise KnowledgeStateError(_("the successor must be one of the conflict's two items"), field="successor_id")
        older = pair[0] if successor_id == pair[1] else pair[1]
        knowledge_supersede(caller, knowledge_id=older, successor_id=successor_id)
        resolution = {"superseded": older, "successor": successor_id}
        status = Conflict.Status.SUPERSEDED
    elif action == "merge":
        if task is None or content is None:
            proposal = MergeProposal.objects.filter(ids=sorted(pair), status=MergeProposal.Status.PENDING).first()
            if proposal is None:
                raise KnowledgeStateError(_("no merge proposal for this pair: give task and content"), field="task")
            task, content = task or proposal.task, content or proposal.content
        scopes = {tuple(sorted(k.scopes)) for k in Knowledge.objects.filter(pk__in=pair)}
        if len(scopes) > 1:
            raise KnowledgeStateError(_("the two items have different scopes: a merge would change who sees them; "
                                        "supersede one instead"), field="action")
        try:
            merged = slim.slim_approve(caller, ids=pair, task=task, content=content)
        except ValueError as exc:
            raise KnowledgeStateError(str(exc), field="action") from None
        resolution = {"merged_id": merged.id}
        status = Conflict.Status.MERGED
    elif action in ("keep_both", "dismiss"):
        into = {k.merged_into_id if k.status == KnowledgeStatus.MERGED else None for k in locked.values()}
        if len(locked) == 2 and len(into) == 1 and None not in into:  # the pair merged into one item meanwhile
            raise KnowledgeStateError(_("%(ids)s merged meanwhile: unmerge first to keep both")
                                      % {"ids": ", ".join(sorted(locked))}, field="action")
        status = Conflict.Status.KEPT_BOTH if action == "keep_both" else Conflict.Status.DISMISSED
        if not SlimRejection.objects.filter(first_id=pair[0], second_id=pair[1]).exists():
            slim.slim_reject(caller, first_id=pair[0], second_id=pair[1])  # nor is the pair proposed for a merge
            resolution = {"rejected_merge": True}
        proposal = MergeProposal.objects.filter(ids=sorted(pair), status=MergeProposal.Status.PENDING).first()
        if proposal is not None:  # the merge review's proposal for this pair is settled too
            MergeProposal.objects.filter(pk=proposal.pk).update(
                status=MergeProposal.Status.REJECTED, decided_by=caller.principal, decided_at=timezone.now())
            resolution["rejected_proposal"] = proposal.id
    else:
        raise KnowledgeStateError(_("unknown action %(action)r: one of %(actions)s") % {"action": action, "actions": ", ".join(ACTIONS)},
                                  field="action")
    Conflict.objects.filter(pk=conflict.pk).update(status=status, resolution=resolution, resolved_by=caller.principal,
                                                   resolved_at=timezone.now(), updated_at=timezone.now())
    conflict.refresh_from_db()
    return conflict


@transaction.atomic
def conflict_reopen(caller, *, conflict_id: int) -> Conflict:
    """Reverse a conflict's resolution and make it open again: a superseded item is active again, a merge is
    undone (its originals active, the merged item archived)."""
    conflict = Conflict.objects.get(pk=conflict_id)
    merged_id = (conflict.resolution or {}).get("merged_id")
    # the items first, as every writer of several items takes them: the pair, and a merge's item and whole group
    services.lock_items([conflict.first_id, conflict.second_id, *(slim.merge_and_originals(merged_id) if merged_id else [])])
    conflict = Conflict.objects.select_for_update().get(pk=conflict_id)
    if conflict.status == Conflict.Status.OPEN:
        raise KnowledgeStateError(_("conflict %(id)s is open already") % {"id": conflict.id}, field="conflict_id")
    if conflict.status == Conflict.Status.SUPERSEDED:
        older = Knowledge.objects.get(pk=conflict.resolution["superseded"])
        # only the decision this conflict made: superseded since by another item (a later conflict's), it stays so
        if older.status == KnowledgeStatus.SUPERSEDED and older.superseded_by_id == conflict.resolution.get("successor"):
            knowledge_unsupersede(caller, knowledge_id=older.id)
    elif conflict.status == Conflict.Status.MERGED:
        merged = Knowledge.objects.filter(pk=conflict.resolution.get("merged_id")).first()
        if merged is not None and merged.status == KnowledgeStatus.ACTIVE and merged.merged_from.exists():
            slim.knowledge_unmerge(caller, merged_id=merged.id)
    if conflict.resolution.get("rejected_merge"):
        SlimRejection.objects.filter(first_id=conflict.first_id, second_id=conflict.second_id).delete()
    proposal_id = conflict.resolution.get("rejected_proposal")
    if proposal_id and not MergeProposal.objects.filter(ids=sorted([conflict.first_id, conflict.second_id]),
                                                        status=MergeProposal.Status.PENDING).exists():
        MergeProposal.objects.filter(pk=proposal_id, status=MergeProposal.Status.REJECTED).update(
            status=MergeProposal.Status.PENDING, decided_by="", decided_at=None)
    Conflict.objects.filter(pk=conflict.pk).update(status=Conflict.Status.OPEN, resolution={}, resolved_by="",
                                                   resolved_at=None, updated_at=timezone.now())
    conflict.refresh_from_db()
    return conflict
