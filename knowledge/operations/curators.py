"""What the curation UI does, as operations: for people with the curator role and for curator tokens.

Item-level changes (restore a version, archive, make active) follow the edit rule: the item's
owner or a curator, with write access to one of its scopes. Unmerge, merge review and evolve
rollback are curators' work (`permission="curate"`). A curator token acts within its writable
scopes; a person with the curator role everywhere. The UI's views call these same operations,
so every curation action is validated, filtered and audited as the API's are.
"""
import uuid

from django.http import Http404
from django.utils.translation import gettext as _
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied

from agents.caller import Caller
from agents.operations import operation
from jobs.models import Job
from jobs.operations import JobOutput
from knowledge import evolve, outputs, selectors, services, slim
from knowledge.errors import KnowledgeStateError
from knowledge.limits import CONTENT_MAX, REASON_MAX, TASK_MAX
from knowledge.models import Knowledge, KnowledgeVersion, MergeProposal
from knowledge.operations.agents import changeable_item, visible_item
from core.fields import NoUnknownFields
from knowledge.serializers import KnowledgeSerializer


class RestoreInput(NoUnknownFields, serializers.Serializer):
    version = serializers.IntegerField(min_value=1, help_text="the version number to put back (GET .../versions)")


class StatusInput(NoUnknownFields, serializers.Serializer):
    reason = serializers.CharField(max_length=REASON_MAX, required=False, allow_blank=True, default="")


MERGE_IDS_MAX = slim.GROUP_MAX  # items in one merge group (approve or reject)
MERGE_ID_MAX = 40  # characters of one id in it


def merge_ids_problem(ids: list[str]) -> str | None:
    """What makes `ids` no group to merge or reject beyond their count and length (the input's and the curation UI
    form's rule), or None: each item named once, at least two different ones. Merging an item with itself would
    make a one-item copy; rejecting it would store a pair of one item (the database refuses it)."""
    if len(set(ids)) < 2:
        return _("a merge needs at least two different items")
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        return _("each item once: %(ids)s named more than once") % {"ids": ", ".join(twice)}
    return None


class MergeIdsInput(NoUnknownFields, serializers.Serializer):
    ids = serializers.ListField(child=serializers.CharField(max_length=MERGE_ID_MAX), min_length=2,
                                max_length=MERGE_IDS_MAX, help_text="the group's item ids, each once")

    def validate_ids(self, ids):
        problem = merge_ids_problem(ids)
        if problem:
            raise serializers.ValidationError(problem)
        return ids


class MergeApproveInput(MergeIdsInput):
    task = serializers.CharField(max_length=TASK_MAX, required=False,
                                 help_text="the merged item's task; default: the proposal's (edit-and-approve: your own)")
    content = serializers.CharField(max_length=CONTENT_MAX, required=False,
                                    help_text="the merged item's content; default: the proposal's")


def _curated_items(caller: Caller, ids: list[str]) -> list[Knowledge]:
    """Every item of a group, each visible and writable by the caller (a person curator: any)."""
    items = Knowledge.objects.visible_to(caller).in_bulk(ids)
    missing = [i for i in ids if i not in items]
    if missing:
        raise Http404(f"no knowledge items {', '.join(missing)}")
    refused = [i for i in ids if not caller.may_write_any(items[i].scopes)]
    if refused:
        raise PermissionDenied(_("this caller may not write to the scopes of %(ids)s") % {"ids": ", ".join(refused)})
    return [items[i] for i in ids]


@operation("knowledge_versions", output=outputs.VersionsOutput)
def knowledge_versions(caller: Caller, *, knowledge_id) -> dict:
    """An item's earlier texts, newest first: number, task, content, tags, who changed it, why and when."""
    item = visible_item(caller, knowledge_id)
    versions = KnowledgeVersion.objects.filter(knowledge=item).order_by("-number")
    return {"knowledge_id": item.id, "count": len(versions), "results": [
        {"number": v.number, "task": v.task, "content": v.content, "tags": v.tags, "changed_by": v.changed_by,
         "reason": v.reason, "job_id": str(v.job_id) if v.job_id else None,
         "created_at": serializers.DateTimeField().to_representation(v.created_at)}
        for v in versions]}


@operation("knowledge_restore_version", input=RestoreInput, output=KnowledgeSerializer, writes=True,
           permission="write")
def knowledge_restore_version(caller: Caller, *, knowledge_id, version) -> Knowledge:
    """Put an earlier version's text back; the text it replaces becomes a new version (nothing is lost)."""
    item = changeable_item(caller, knowledge_id)
    try:
        services.knowledge_restore_version(caller, knowledge_id=item.id, number=version)
    except KnowledgeVersion.DoesNotExist:
        raise serializers.ValidationError({"version": [f"{item.id} has no version {version}"]}) from None
    return selectors.knowledge_get(knowledge_id=item.id)


@operation("knowledge_archive", input=StatusInput, output=KnowledgeSerializer, writes=True, permission="write")
def knowledge_archive(caller: Caller, *, knowledge_id, reason) -> Knowledge:
    """Archive an active item: search and the list skip it; `knowledge_activate` brings it back."""
    item = changeable_item(caller, knowledge_id)
    services.knowledge_set_status(caller, knowledge_id=item.id, status=Knowledge.Status.ARCHIVED)
    return selectors.knowledge_get(knowledge_id=item.id)


@operation("knowledge_activate", input=StatusInput, output=KnowledgeSerializer, writes=True, permission="write")
def knowledge_activate(caller: Caller, *, knowledge_id, reason) -> Knowledge:
    """Make an archived or superseded item active again (a merged one comes back through knowledge_unmerge); the
    conflict whose review superseded it is open again."""
    item = changeable_item(caller, knowledge_id)
    if item.status == Knowledge.Status.SUPERSEDED:
        from knowledge.supersede import knowledge_unsupersede

        knowledge_unsupersede(caller, knowledge_id=item.id)
    else:
        services.knowledge_set_status(caller, knowledge_id=item.id, status=Knowledge.Status.ACTIVE)
    return selectors.knowledge_get(knowledge_id=item.id)


@operation("knowledge_unmerge", output=outputs.UnmergeOutput, writes=True, permission="curate")
def knowledge_unmerge(caller: Caller, *, knowledge_id) -> dict:
    """Undo a merge: its originals become active again and the merged item is archived."""
    item = visible_item(caller, knowledge_id)
    _curated_items(caller, [item.id, *Knowledge.objects.filter(merged_into=item).values_list("id", flat=True)])
    try:
        restored = slim.knowledge_unmerge(caller, merged_id=item.id)
    except ValueError as exc:
        raise KnowledgeStateError(str(exc), field="knowledge_id") from None
    return {"knowledge_id": item.id, "status": "archived", "restored": restored}


class ProposalsInput(NoUnknownFields, serializers.Serializer):
    status = serializers.ChoiceField(choices=MergeProposal.Status.values, default=MergeProposal.Status.PENDING,
                                     help_text="pending (default: those still awaiting a curator), approved, edited or rejected")


def proposal_reply(p: MergeProposal) -> dict:
    return {"id": p.id, "ids": list(p.ids), "status": p.status, "proposal": {"task": p.task, "content": p.content},
            "job_id": str(p.job_id) if p.job_id else None, "conflict_id": p.conflict_id, "merged_id": p.merged_id or None,
            "decided_by": p.decided_by, "created_at": serializers.DateTimeField().to_representation(p.created_at),
            "decided_at": serializers.DateTimeField().to_representation(p.decided_at) if p.decided_at else None}


@operation("merge_proposals", input=ProposalsInput, output=outputs.ProposalsOutput, permission="curate")
def merge_proposals(caller: Caller, *, status=MergeProposal.Status.PENDING) -> dict:
    """Stored merge proposals (from dry-run slim jobs and from duplicates that conflict detection found), with
    the proposed text; pending ones are those whose items are all still active."""
    if status == MergeProposal.Status.PENDING:
        proposals = slim.slim_proposals_pending()
    else:
        proposals = list(MergeProposal.objects.filter(status=status).order_by("-decided_at", "-id")[:500])
    visible = set(Knowledge.objects.visible_to(caller).filter(pk__in={i for p in proposals for i in p.ids})
                  .values_list("id", flat=True)) if caller.readable_scopes is not None else None
    proposals = [p for p in proposals if visible is None or set(p.ids) <= visible]
    return {"count": len(proposals), "results": [proposal_reply(p) for p in proposals]}


@operation("merge_approve", input=MergeApproveInput, output=KnowledgeSerializer, writes=True, permission="curate")
def merge_approve(caller: Caller, *, ids, task=None, content=None) -> Knowledge:
    """Merge a group into one new item: with the proposal's text, or with yours (edit and approve)."""
    _curated_items(caller, ids)
    if task is None or content is None:
        proposal = next((p for p in slim.slim_proposals_pending() if set(p.ids) == set(ids)), None)
        if proposal is None:
            raise serializers.ValidationError({"ids": ["no pending proposal for this group: give task and content"]})
        task, content = task or proposal.task, content or proposal.content
    try:
        merged = slim.slim_approve(caller, ids=list(ids), task=task, content=content)
    except ValueError as exc:
        raise KnowledgeStateError(str(exc), field="ids") from None
    return selectors.knowledge_get(knowledge_id=merged.id)


@operation("merge_reject", input=MergeIdsInput, output=outputs.RejectOutput, writes=True, permission="curate")
def merge_reject(caller: Caller, *, ids) -> dict:
    """Reject a proposed group: none of its pairs is proposed again."""
    _curated_items(caller, ids)
    slim.slim_reject_group(caller, ids=list(ids))
    return {"ids": list(ids), "rejected": True}


@operation("evolve_rollback", output=KnowledgeSerializer, writes=True, permission="curate")
def evolve_rollback(caller: Caller, *, job_id) -> Knowledge:
    """Put back the text an evolve job replaced (the evolved text is kept as a version)."""
    job = _evolve_job(caller, job_id)
    evolve.evolve_rollback(caller, job=job)
    return selectors.knowledge_get(knowledge_id=job.subject)


def _evolve_job(caller: Caller, job_id) -> Job:
    """The evolve job, if `caller` may see it and change its item (404 / 403 otherwise)."""
    job = Job.objects.visible_to(caller).filter(pk=job_id, kind="evolve").first() if _is_uuid(job_id) else None
    if job is None:
        raise Http404
    changeable_item(caller, job.subject)
    return job


@operation("evolve_accept", output=KnowledgeSerializer, writes=True, permission="curate")
def evolve_accept(caller: Caller, *, job_id) -> Knowledge:
    """Put an evolve job's reviewed rewrite live (evolve under review): the old text is kept as a version."""
    return evolve.evolve_accept(caller, job=_evolve_job(caller, job_id))


@operation("evolve_reject", output=JobOutput, writes=True, permission="curate")
def evolve_reject(caller: Caller, *, job_id) -> Job:
    """Turn down an evolve job's reviewed rewrite: the item stays as it is; the job keeps the proposal."""
    return evolve.evolve_reject(caller, job=_evolve_job(caller, job_id))


def _is_uuid(value) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True
