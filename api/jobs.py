"""GET /api/jobs/{id}: jobs.operations' job_get over HTTP."""
from rest_framework.views import APIView

from jobs.operations import JobOutput
from api import schema
from api.views import check_query, reply


class JobDetailApi(APIView):
    @schema.for_operation("job_get", operation_id="job_get", responses={200: JobOutput, **schema.ERRORS})
    def get(self, request, job_id):
        check_query(request)
        return reply(request, "job_get", job_id=str(job_id))
