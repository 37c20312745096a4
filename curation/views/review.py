"""Slim review: proposed merge groups beside their originals; approve (edited or not), reject, unmerge."""
from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from agents import operations
from curation import permissions
from curation.forms import MergeForm
from curation.views.common import caller_of
from curation.views.evolve import JOB, job_context
from jobs.models import Job
from knowledge import llm, slim
from knowledge.errors import KnowledgeStateError
from knowledge.models import Knowledge

REVIEW = "curation/review.html"


def proposal_rows() -> list[dict]:
    proposals = slim.slim_proposals_pending()
    items = Knowledge.objects.in_bulk({i for p in proposals for i in p.ids})
    return [{"id": p.id, "ids": p.ids, "job_id": p.job_id, "conflict_id": p.conflict_id, "originals": [items[i] for i in p.ids],
             "form": MergeForm(initial={"ids": ",".join(p.ids), "task": p.task, "content": p.content})}
            for p in proposals]


@permissions.require(permissions.VIEW)
@require_GET
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


@permissions.require(permissions.CURATE)
@require_POST
def approve(request):
    form = MergeForm(request.POST)
    if form.is_valid():
        for name in ("task", "content"):
            if not form.cleaned_data[name].strip():
                form.add_error(name, _("the merged item needs a task") if name == "task" else _("the merged item needs a content"))
    if not form.is_valid():
        return _proposal_result(request, form, status=422, originals=Knowledge.objects.filter(pk__in=form.data.get("ids", "").split(",")))
    try:
        merged = operations.call("merge_approve", caller_of(request), data={
            "ids": form.cleaned_data["ids"], "task": form.cleaned_data["task"], "content": form.cleaned_data["content"]})
    except KnowledgeStateError as exc:
        form.add_error(None, _("%(problem)s: reload the page to see the current proposals") % {"problem": exc.message})
        return _proposal_result(request, form, status=409)
    return _proposal_result(request, form, merged=merged)


@permissions.require(permissions.CURATE)
@require_POST
def reject(request):
    form = MergeForm(request.POST)
    if not form.is_valid():
        return _proposal_result(request, form, status=422)
    operations.call("merge_reject", caller_of(request), data={"ids": form.cleaned_data["ids"]})
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
