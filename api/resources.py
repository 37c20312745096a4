"""POST /api/resource and GET /api/resource/{id} (seed 003, scenarios 1-4): resources.operations over HTTP."""
from rest_framework.views import APIView

from api import schema
from api.views import idempotent_reply, reply
from resources.serializers import ResourceGetInput, ResourceInput, ResourceOutput


class ResourceCollectionApi(APIView):
    @schema.for_operation("resource_save", request=ResourceInput, responses={201: ResourceOutput, **schema.WRITE_ERRORS})
    def post(self, request):
        return idempotent_reply(request, "resource_save", data=request.data)


class ResourceDetailApi(APIView):
    @schema.for_operation("resource_get", operation_id="resource_get", parameters=[ResourceGetInput],
                   responses={200: ResourceOutput, **schema.errors(410)})
    def get(self, request, resource_id):
        return reply(request, "resource_get", data=request.query_params, resource_id=resource_id,
                     remote_addr=request.META.get("REMOTE_ADDR"), user_agent=request.META.get("HTTP_USER_AGENT", ""))
