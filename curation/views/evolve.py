"""Evolve from the UI: queue the job, poll it, then compare old and new and accept or roll back."""
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from curation import permissions
from curation.forms import EvolveForm
from agents import operations
from curation.views.common import caller_of
from curation.views.knowledge import DETAIL, _item, detail_context
from jobs.models import Job
from knowledge import evolve, llm
from knowledge.errors import KnowledgeStateError

JOB = "curation/job.html"


def job_context(job: Job) -> dict:
    return {"job": job, "outcome": evolve.evolve_outcome(job) if job.kind == "evolve" else None,
            "polling": job.status in (Job.Status.QUEUED, Job.Status.RUNNING)}


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
        form.add_error(None, f"{exc}; then restart KnowHub.")
        return render(request, f"{DETAIL}#evolve", detail_context(item, evolve_form=form), status=409)
    return render(request, f"{DETAIL}#evolve", detail_context(item, **job_context(job)))


@permissions.require(permissions.VIEW)
@require_GET
def job_status(request, job_id):
    return render(request, JOB, job_context(get_object_or_404(Job, pk=job_id)))


@permissions.require(permissions.CURATE)
@require_POST
def evolve_rollback(request, job_id):
    job = get_object_or_404(Job, pk=job_id, kind="evolve")
    try:
        operations.call("evolve_rollback", caller_of(request), job_id=str(job.id))
    except KnowledgeStateError:
        return render(request, JOB, {**job_context(job), "job_error": "This job changed nothing that could be rolled back."},
                      status=409)
    return render(request, JOB, {**job_context(job), "rolled_back_now": True})
