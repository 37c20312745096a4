"""The job operations: a job's state, for whoever asked for it or can read its item."""
import uuid

from django.http import Http404
from rest_framework import serializers

from agents.operations import operation
from jobs.models import Job


class JobOutput(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.CharField()
    status = serializers.CharField()
    knowledge_id = serializers.CharField(source="subject", allow_null=True, help_text="the item the job is about (evolve)")
    progress = serializers.DictField()
    result = serializers.JSONField(allow_null=True)
    error = serializers.CharField()
    attempts = serializers.IntegerField()
    requested_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


@operation("job_get", output=JobOutput)
def job_get(caller, *, job_id) -> Job:
    """A job's status (queued, running, succeeded, failed), progress, result or error; 404 unless visible."""
    try:
        job_id = uuid.UUID(str(job_id))
    except ValueError:
        raise Http404 from None
    job = Job.objects.visible_to(caller).filter(pk=job_id).first()
    if job is None:
        raise Http404
    return job
