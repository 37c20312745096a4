"""Curators' operations over REST (knowledge.operations.curators): for the curator role and curator tokens."""
from rest_framework.views import APIView

from api import schema
from api.views import reply
from knowledge.operations.curators import MergeApproveInput, MergeIdsInput, ProposalsInput, RestoreInput, StatusInput
from knowledge.outputs import ProposalsOutput, RejectOutput, UnmergeOutput, VersionsOutput
from knowledge.serializers import KnowledgeSerializer


class KnowledgeVersionsApi(APIView):
    @schema.for_operation("knowledge_versions", responses={200: VersionsOutput, **schema.ERRORS})
    def get(self, request, knowledge_id):
        return reply(request, "knowledge_versions", knowledge_id=knowledge_id)


class KnowledgeRestoreApi(APIView):
    @schema.for_operation("knowledge_restore_version", request=RestoreInput,
                          responses={200: KnowledgeSerializer, **schema.WRITE_ERRORS})
    def post(self, request, knowledge_id):
        return reply(request, "knowledge_restore_version", data=request.data, knowledge_id=knowledge_id)


class KnowledgeArchiveApi(APIView):
    @schema.for_operation("knowledge_archive", request=StatusInput,
                          responses={200: KnowledgeSerializer, **schema.errors(409, 413)})
    def post(self, request, knowledge_id):
        return reply(request, "knowledge_archive", data=request.data, knowledge_id=knowledge_id)


class KnowledgeActivateApi(APIView):
    @schema.for_operation("knowledge_activate", request=StatusInput,
                          responses={200: KnowledgeSerializer, **schema.errors(409, 413)})
    def post(self, request, knowledge_id):
        return reply(request, "knowledge_activate", data=request.data, knowledge_id=knowledge_id)


class KnowledgeUnmergeApi(APIView):
    @schema.for_operation("knowledge_unmerge", request=None, responses={200: UnmergeOutput, **schema.errors(409, 413)})
    def post(self, request, knowledge_id):
        return reply(request, "knowledge_unmerge", knowledge_id=knowledge_id)


class MergeProposalsApi(APIView):
    @schema.for_operation("merge_proposals", parameters=[ProposalsInput], responses={200: ProposalsOutput, **schema.ERRORS})
    def get(self, request):
        return reply(request, "merge_proposals", data=request.query_params)


class MergeApproveApi(APIView):
    @schema.for_operation("merge_approve", request=MergeApproveInput,
                          responses={200: KnowledgeSerializer, **schema.errors(409, 413)})
    def post(self, request):
        return reply(request, "merge_approve", data=request.data)


class MergeRejectApi(APIView):
    @schema.for_operation("merge_reject", request=MergeIdsInput, responses={200: RejectOutput, **schema.WRITE_ERRORS})
    def post(self, request):
        return reply(request, "merge_reject", data=request.data)


class EvolveRollbackApi(APIView):
    @schema.for_operation("evolve_rollback", request=None, responses={200: KnowledgeSerializer, **schema.errors(409, 413)})
    def post(self, request, job_id):
        return reply(request, "evolve_rollback", job_id=str(job_id))
