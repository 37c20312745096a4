"""Evolve from the UI: queue the job, poll it, then compare old and new and accept or roll back."""
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe

from curation import permissions
from curation.forms import EvolveForm
from agents import operations
from curation.views.common import caller_of
from curation.views.knowledge import DETAIL, _item, detail_context
from jobs.models import Job
from knowledge import evolve, llm
from knowledge.errors import KnowledgeStateError
from knowledge.models import Knowledge

JOB = "curation/job.html"


def job_context(job: Job) -> dict:
    pending_review = job.kind == "evolve" and (job.result or {}).get("review") == "pending"
    return {"job": job, "outcome": evolve.evolve_outcome(job) if job.kind == "evolve" else None,
            "polling": job.status in (Job.Status.QUEUED, Job.Status.RUNNING),
            "review_item": Knowledge.objects.filter(pk=job.subject).first() if pending_review else None}


@permissions.require(permissions.CURATE)
@require_POST
def evolve_start(request, knowledge_id):
    item = _item(knowledge_id)
    form = EvolveForm(request.POST)
    if not form.is_valid():
        return render(request, f"{DETAIL}#evolve", detail_context(item, evolve_form=form), status=422)
    try:
        reply = operations.call("knowledge_update", caller_of(request), knowledge_id=item.id,
                                data={"evolve_feedback": form.cleaned_data["feedback"]})
        job = Job.objects.get(pk=reply["job"]["id"])
    except llm.LLMNotConfigured as exc:
        form.add_error(None, _("%(problem)s; then restart KnowHub.") % {"problem": exc})
        return render(request, f"{DETAIL}#evolve", detail_context(item, evolve_form=form), status=409)
    return render(request, f"{DETAIL}#evolve", detail_context(item, **job_context(job)))


def job_panel(request, job: Job, *, status: int = 200, **extra) -> HttpResponse:
    """The job's panel; on the item page (htmx), once an evolve job has changed the item, with the item's text,
    versions and fields swapped in too (out of band), so the page shows what is live without a reload."""
    html = render_to_string(JOB, {**job_context(job), **extra}, request=request)
    if request.htmx and job.kind == "evolve" and job.subject and job.status == Job.Status.SUCCEEDED:
        item = detail_context(_item(job.subject), oob=True, content_oob=True)
        html += "".join(render_to_string(f"{DETAIL}#{part}", item, request=request)
                        for part in ("content", "versions", "fields"))
    return HttpResponse(html, status=status)


@permissions.require(permissions.VIEW)
@require_safe
def job_status(request, job_id):
    return job_panel(request, get_object_or_404(Job, pk=job_id))


@permissions.require(permissions.CURATE)
@require_POST
def evolve_rollback(request, job_id):
    job = get_object_or_404(Job, pk=job_id, kind="evolve")
    try:
        operations.call("evolve_rollback", caller_of(request), job_id=str(job.id))
    except KnowledgeStateError as exc:  # nothing to roll back, rolled back already, or the text changed since
        return render(request, JOB, {**job_context(job), "job_error": exc.message}, status=409)
    return job_panel(request, job, rolled_back_now=True)


def _review(request, job_id, name: str):
    job = get_object_or_404(Job, pk=job_id, kind="evolve")
    try:
        operations.call(name, caller_of(request), job_id=str(job.id))
    except KnowledgeStateError as exc:
        return render(request, JOB, {**job_context(job), "job_error": exc.message}, status=409)
    return job_panel(request, Job.objects.get(pk=job.pk))


@permissions.require(permissions.CURATE)
@require_POST
def evolve_accept(request, job_id):
    """Evolve under review: the proposed rewrite goes live (the page's text, versions and fields follow)."""
    return _review(request, job_id, "evolve_accept")


@permissions.require(permissions.CURATE)
@require_POST
def evolve_reject(request, job_id):
    return _review(request, job_id, "evolve_reject")
