"""Evolve from the UI: queue the job, poll it, then compare old and new and accept or roll back."""
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from curation import permissions
from curation.forms import EvolveForm
from curation.views.common import principal
from curation.views.knowledge import DETAIL, _item, detail_context
from jobs.models import Job
from knowledge import evolve, llm, services
from knowledge.models import KnowledgeVersion

JOB = "curation/job.html"


def evolve_outcome(job: Job) -> dict | None:
    """For a finished evolve job: the text before (its version) and after (the next version, or the current text)."""
    before = KnowledgeVersion.objects.filter(job=job).first()
    if job.status != Job.Status.SUCCEEDED or before is None:
        return None
    after = KnowledgeVersion.objects.filter(knowledge_id=before.knowledge_id, number=before.number + 1).first()
    after = after or before.knowledge
    rolled_back = KnowledgeVersion.objects.filter(knowledge_id=before.knowledge_id, number__gt=before.number,
                                                  reason=f"restored version {before.number}").exists()
    return {"before": before, "after": after, "rolled_back": rolled_back}


def job_context(job: Job) -> dict:
    return {"job": job, "outcome": evolve_outcome(job) if job.kind == "evolve" else None,
            "polling": job.status in (Job.Status.QUEUED, Job.Status.RUNNING)}


@permissions.require(permissions.CURATE)
@require_POST
def evolve_start(request, knowledge_id):
    item = _item(knowledge_id)
    form = EvolveForm(request.POST)
    if not form.is_valid():
        return render(request, f"{DETAIL}#evolve", detail_context(item, evolve_form=form), status=422)
    try:
        job = evolve.evolve_request(knowledge_id=item.id, feedback=form.cleaned_data["feedback"], requested_by=principal(request))
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
    outcome = evolve_outcome(job)
    if outcome is None:
        return render(request, JOB, {**job_context(job), "job_error": "This job changed nothing that could be rolled back."},
                      status=409)
    services.knowledge_restore_version(knowledge_id=job.knowledge_id, number=outcome["before"].number,
                                       changed_by=principal(request))
    return render(request, JOB, {**job_context(job), "rolled_back_now": True})
