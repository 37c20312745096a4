"""Slim review: proposed merge groups beside their originals; approve (edited or not), reject, unmerge."""
from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe

from agents import operations
from curation import permissions
from curation.forms import MergeForm, split_list
from curation.views.common import REFUSALS, caller_of, refuse
from curation.views.evolve import JOB, job_context
from jobs.models import Job
from knowledge import llm, slim
from knowledge.errors import KnowledgeStateError
from knowledge.models import Knowledge
from knowledge.operations.curators import MERGE_IDS_MAX

REVIEW = "curation/review.html"


def proposal_rows() -> list[dict]:
    proposals = slim.slim_proposals_pending()
    items = Knowledge.objects.in_bulk({i for p in proposals for i in p.ids})
    return [{"id": p.id, "ids": p.ids, "job_id": p.job_id, "conflict_id": p.conflict_id, "originals": [items[i] for i in p.ids],
             "form": MergeForm(initial={"ids": ",".join(p.ids), "task": p.task, "content": p.content})}
            for p in proposals]


@permissions.require(permissions.VIEW)
@require_safe
def review(request):
    return render(request, REVIEW, {"proposals": proposal_rows(), "llm_configured": llm.llm_configured()})


@permissions.require(permissions.CURATE)
@require_POST
def find_duplicates(request):
    try:
        reply = operations.call("knowledge_slim", caller_of(request), data={"dry_run": True})
        job = Job.objects.get(pk=reply["job"]["id"])
    except llm.LLMNotConfigured as exc:
        return render(request, JOB, {"job_error": _("%(problem)s; then restart KnowHub.") % {"problem": exc}}, status=409)
    return render(request, JOB, job_context(job))


def _proposal_result(request, form, *, status=200, **extra):
    return render(request, f"{REVIEW}#proposal", {"row": {"form": form, "ids": form.data.get("ids", "").split(","), **extra}},
                  status=status)


def _refused(request, form, *, status=422):
    """The group's card again with the form's errors in place, beside the originals it names (as many as a merge
    takes)."""
    originals = Knowledge.objects.filter(pk__in=split_list(form.data.get("ids", ""))[:MERGE_IDS_MAX])
    return _proposal_result(request, form, status=status, originals=originals)


def _decide(request, form, name: str, data: dict) -> tuple:
    """Run the merge operation `name`: (its reply, None), or (None, the status to answer) when it refuses, the reason
    put into `form`: 409 for a group no longer pending, 422 for what the form could not check (an operation's
    input rule, a scope). A refused operation wrote nothing (its transaction is rolled back)."""
    try:
        return operations.call(name, caller_of(request), data=data), None
    except KnowledgeStateError as exc:
        form.add_error(None, _("%(problem)s: reload the page to see the current proposals") % {"problem": exc.message})
        return None, 409
    except REFUSALS as exc:
        refuse(form, exc)
        return None, 422


@permissions.require(permissions.CURATE)
@require_POST
def approve(request):
    form = MergeForm(request.POST)
    if form.is_valid():
        for name in ("task", "content"):
            if not form.cleaned_data[name].strip():
                form.add_error(name, _("the merged item needs a task") if name == "task" else _("the merged item needs a content"))
    if not form.is_valid():
        return _refused(request, form)
    merged, refused = _decide(request, form, "merge_approve", {
        "ids": form.cleaned_data["ids"], "task": form.cleaned_data["task"], "content": form.cleaned_data["content"]})
    if refused:
        return _refused(request, form, status=refused)
    return _proposal_result(request, form, merged=merged)


@permissions.require(permissions.CURATE)
@require_POST
def reject(request):
    form = MergeForm(request.POST)
    if not form.is_valid():
        return _refused(request, form)
    _, refused = _decide(request, form, "merge_reject", {"ids": form.cleaned_data["ids"]})
    if refused:
        return _refused(request, form, status=refused)
    return _proposal_result(request, form, rejected=True)


@permissions.require(permissions.CURATE)
@require_POST
def unmerge(request, knowledge_id):
    try:
        restored = operations.call("knowledge_unmerge", caller_of(request), knowledge_id=knowledge_id)["restored"]
    except Http404:
        messages.error(request, _("No knowledge item %(id)s.") % {"id": knowledge_id})
        return redirect("curation:knowledge_list")
    except KnowledgeStateError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Unmerged: %(restored)s are active again; %(id)s is archived.")
                         % {"restored": ", ".join(restored), "id": knowledge_id})
    return redirect("curation:knowledge_detail", knowledge_id=knowledge_id)
