"""The conflict review and supersede over REST (knowledge.operations.conflicts), and evolve under review."""
from rest_framework.views import APIView

from api import schema
from api.views import reply
from jobs.operations import JobOutput
from knowledge.operations.conflicts import (
    ConflictListInput, ConflictListOutput, ConflictOutput, ConflictResolveInput, SupersedeInput,
)
from knowledge.serializers import KnowledgeSerializer


class ConflictCollectionApi(APIView):
    @schema.for_operation("conflict_list", operation_id="conflict_list", parameters=[ConflictListInput], responses={200: ConflictListOutput, **schema.ERRORS})
    def get(self, request):
        return reply(request, "conflict_list", data=request.query_params)


class ConflictDetailApi(APIView):
    @schema.for_operation("conflict_get", operation_id="conflict_get", responses={200: ConflictOutput, **schema.ERRORS})
    def get(self, request, conflict_id):
        return reply(request, "conflict_get", conflict_id=conflict_id)


class ConflictResolveApi(APIView):
    @schema.for_operation("conflict_resolve", request=ConflictResolveInput,
                          responses={200: ConflictOutput, **schema.errors(409, 413)})
    def post(self, request, conflict_id):
        return reply(request, "conflict_resolve", data=request.data, conflict_id=conflict_id)


class ConflictReopenApi(APIView):
    @schema.for_operation("conflict_reopen", request=None, responses={200: ConflictOutput, **schema.errors(409, 413)})
    def post(self, request, conflict_id):
        return reply(request, "conflict_reopen", conflict_id=conflict_id)


class KnowledgeSupersedeApi(APIView):
    @schema.for_operation("knowledge_supersede", request=SupersedeInput,
                          responses={200: KnowledgeSerializer, **schema.errors(409, 413)})
    def post(self, request, knowledge_id):
        return reply(request, "knowledge_supersede", data=request.data, knowledge_id=knowledge_id)


class EvolveAcceptApi(APIView):
    @schema.for_operation("evolve_accept", request=None, responses={200: KnowledgeSerializer, **schema.errors(409, 413)})
    def post(self, request, job_id):
        return reply(request, "evolve_accept", job_id=str(job_id))


class EvolveRejectApi(APIView):
    @schema.for_operation("evolve_reject", request=None, responses={200: JobOutput, **schema.errors(409, 413)})
    def post(self, request, job_id):
        return reply(request, "evolve_reject", job_id=str(job_id))
