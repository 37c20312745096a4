"""Conflicts and supersede, as operations: what the conflict review does, for curators and curator tokens.

A conflict is visible when both its items are; acting on one needs write access to both (a person with the
curator role: any). Superseding an item directly follows the edit rule (its owner or a curator).
"""
from django.db.models import Prefetch, Q
from django.http import Http404
from rest_framework import serializers

from agents.caller import Caller
from agents.operations import operation
from core.fields import NoUnknownFields
from knowledge import conflicts, selectors
from knowledge.limits import CONTENT_MAX, TASK_MAX
from knowledge.models import Conflict, Knowledge, MergeProposal
from knowledge.operations.agents import changeable_item
from knowledge.operations.curators import _curated_items
from knowledge.serializers import KnowledgeSerializer

PAGE_MAX = 200


class ConflictListInput(NoUnknownFields, serializers.Serializer):
    status = serializers.ChoiceField(choices=[*Conflict.Status.values, "all"], default=Conflict.Status.OPEN)
    kind = serializers.ChoiceField(choices=Conflict.Kind.values, required=False)
    knowledge_id = serializers.CharField(max_length=40, required=False, help_text="only the conflicts of this item")
    limit = serializers.IntegerField(min_value=1, max_value=PAGE_MAX, default=50)
    offset = serializers.IntegerField(min_value=0, max_value=1_000_000, default=0)


class ConflictResolveInput(NoUnknownFields, serializers.Serializer):
    action = serializers.ChoiceField(choices=conflicts.ACTIONS, help_text=(
        "keep_both; supersede (successor_id supersedes the other; default: the newer item); merge (through the "
        "merge path: task/content, or the pair's pending proposal); dismiss (never raised again)"))
    successor_id = serializers.CharField(max_length=40, required=False)
    task = serializers.CharField(max_length=TASK_MAX, required=False)
    content = serializers.CharField(max_length=CONTENT_MAX, required=False)


class SupersedeInput(NoUnknownFields, serializers.Serializer):
    successor_id = serializers.CharField(max_length=40, help_text="the active item that replaces this one")


class ConflictItem(serializers.Serializer):
    id = serializers.CharField()
    task = serializers.CharField()
    content = serializers.CharField()
    status = serializers.CharField()
    scopes = serializers.ListField(child=serializers.CharField())
    owner = serializers.CharField()
    created_at = serializers.DateTimeField()


class ConflictOutput(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField(help_text="duplicate, refinement, contradiction, or close (no LLM judged it)")
    status = serializers.CharField(help_text="open, kept_both, superseded, merged or dismissed")
    explanation = serializers.CharField()
    similarity = serializers.FloatField()
    model = serializers.CharField()
    detected_for = serializers.CharField()
    first = ConflictItem()
    second = ConflictItem()
    proposal_id = serializers.IntegerField(allow_null=True, help_text="the pending merge proposal for a duplicate pair")
    resolution = serializers.DictField()
    resolved_by = serializers.CharField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


class ConflictListOutput(serializers.Serializer):
    count = serializers.IntegerField(help_text="how many match, over all pages")
    results = ConflictOutput(many=True)
    next_offset = serializers.IntegerField(allow_null=True)


def visible_conflicts(caller: Caller):
    """Conflicts both of whose items `caller` may read, with the items and the pair's pending merge proposal."""
    visible = Knowledge.objects.visible_to(caller)
    return Conflict.objects.filter(first__in=visible, second__in=visible).select_related("first", "second").prefetch_related(
        Prefetch("proposals", queryset=MergeProposal.objects.filter(status=MergeProposal.Status.PENDING), to_attr="pending"))


def conflict_reply(conflict: Conflict) -> dict:
    proposal = next(iter(getattr(conflict, "pending", None) or []), None)
    return {"id": conflict.id, "kind": conflict.kind, "status": conflict.status, "explanation": conflict.explanation,
            "similarity": round(conflict.similarity, 4), "model": conflict.model, "detected_for": conflict.detected_for,
            "first": conflict.first, "second": conflict.second, "proposal_id": proposal.id if proposal else None,
            "resolution": conflict.resolution, "resolved_by": conflict.resolved_by, "resolved_at": conflict.resolved_at,
            "created_at": conflict.created_at}


def _conflict(caller: Caller, conflict_id) -> Conflict:
    try:
        return visible_conflicts(caller).get(pk=int(conflict_id))
    except (ValueError, TypeError, Conflict.DoesNotExist):
        raise Http404 from None


@operation("conflict_list", input=ConflictListInput, output=ConflictListOutput, permission="curate")
def conflict_list(caller: Caller, *, status, limit, offset, kind=None, knowledge_id=None) -> dict:
    """Conflicts found between close items, newest first: open ones by default."""
    found = visible_conflicts(caller)
    if status != "all":
        found = found.filter(status=status)
    if kind:
        found = found.filter(kind=kind)
    if knowledge_id:
        found = found.filter(Q(first_id=knowledge_id) | Q(second_id=knowledge_id))
    total = found.count()
    page = list(found.order_by("-created_at", "-id")[offset:offset + limit])
    return {"count": total, "results": [conflict_reply(c) for c in page],
            "next_offset": offset + limit if offset + limit < total else None}


@operation("conflict_get", output=ConflictOutput, permission="curate")
def conflict_get(caller: Caller, *, conflict_id) -> dict:
    """One conflict: both items, the judgment and, once settled, what was done."""
    return conflict_reply(_conflict(caller, conflict_id))


@operation("conflict_resolve", input=ConflictResolveInput, output=ConflictOutput, writes=True, permission="curate")
def conflict_resolve(caller: Caller, *, conflict_id, action, successor_id=None, task=None, content=None) -> dict:
    """Settle an open conflict: keep both, supersede one by the other, merge them, or dismiss it."""
    conflict = _conflict(caller, conflict_id)
    _curated_items(caller, [conflict.first_id, conflict.second_id])
    settled = conflicts.conflict_resolve(caller, conflict_id=conflict.id, action=action, successor_id=successor_id,
                                         task=task, content=content)
    return conflict_reply(visible_conflicts(caller).get(pk=settled.pk))


@operation("conflict_reopen", output=ConflictOutput, writes=True, permission="curate")
def conflict_reopen(caller: Caller, *, conflict_id) -> dict:
    """Reverse a settled conflict: a superseded item active again, a merge undone; the conflict is open again."""
    conflict = _conflict(caller, conflict_id)
    _curated_items(caller, [conflict.first_id, conflict.second_id])
    reopened = conflicts.conflict_reopen(caller, conflict_id=conflict.id)
    return conflict_reply(visible_conflicts(caller).get(pk=reopened.pk))


@operation("knowledge_supersede", input=SupersedeInput, output=KnowledgeSerializer, writes=True, permission="write")
def knowledge_supersede(caller: Caller, *, knowledge_id, successor_id) -> Knowledge:
    """Mark an item superseded by a better one: search skips it (unless include_superseded), nothing is deleted;
    knowledge_activate makes it active again."""
    item = changeable_item(caller, knowledge_id)
    try:
        successor = changeable_item(caller, successor_id)
    except Http404:
        raise serializers.ValidationError({"successor_id": [f"no knowledge item {successor_id}"]}) from None
    from knowledge.supersede import knowledge_supersede as supersede

    supersede(caller, knowledge_id=item.id, successor_id=successor.id)
    return selectors.knowledge_get(knowledge_id=item.id)
