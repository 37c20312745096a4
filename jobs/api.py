"""GET /api/jobs/{id}: a job's state, for whoever asked for it or can see its item."""
import uuid

from django.db.models import Q
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.models import Job
from knowledge.api import schema
from knowledge.api.views import caller_of


class JobOutput(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.CharField()
    status = serializers.CharField()
    knowledge_id = serializers.CharField(allow_null=True)
    progress = serializers.DictField()
    result = serializers.JSONField(allow_null=True)
    error = serializers.CharField()
    attempts = serializers.IntegerField()
    requested_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class JobDetailApi(APIView):
    @extend_schema(operation_id="job_get", responses={200: JobOutput, **schema.ERRORS})
    def get(self, request, job_id):
        return Response(job_visible(caller=caller_of(request), job_id=job_id))


def job_visible(*, caller, job_id) -> dict:
    """A job the caller asked for, or whose item it can see; 404 otherwise (also for a job_id that is no UUID)."""
    try:
        job_id = uuid.UUID(str(job_id))
    except ValueError:
        raise Http404 from None
    jobs = Job.objects.all()
    if caller.readable_scopes is not None:
        jobs = jobs.filter(Q(requested_by=caller.principal) | Q(knowledge__scopes__overlap=list(caller.readable_scopes)))
    job = jobs.filter(pk=job_id).first()
    if job is None:
        raise Http404
    return JobOutput(job).data
