"""POST /api/resource and GET /api/resource/{id} (seed 003, scenarios 1-4): resources.operations over HTTP."""
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from rest_framework.views import APIView

from api import schema
from api.views import check_query, idempotent_reply, reply
from resources.serializers import ResourceGetInput, ResourceInput, ResourceOutput


def unstored_if_secret(response, field: str):
    """`response` marked never to be stored (`Cache-Control: no-store`, private) when its data holds the secret
    `field`: a revealed secret must not stay in a proxy's or a browser's cache. Its content depends on the caller
    (token or session), so it varies on both."""
    if isinstance(response.data, dict) and field in response.data:
        add_never_cache_headers(response)
        patch_vary_headers(response, ("Authorization", "Cookie"))
    return response


class ResourceCollectionApi(APIView):
    @schema.for_operation("resource_save", request=ResourceInput, responses={201: ResourceOutput, **schema.WRITE_ERRORS})
    def post(self, request):
        return idempotent_reply(request, "resource_save", data=request.data)


class ResourceDetailApi(APIView):
    @schema.for_operation("resource_get", operation_id="resource_get", parameters=[ResourceGetInput],
                   responses={200: ResourceOutput, **schema.errors(410)})
    def get(self, request, resource_id):
        check_query(request, ("reveal",))
        return unstored_if_secret(reply(request, "resource_get", data=request.query_params, resource_id=resource_id,
                                        remote_addr=request.META.get("REMOTE_ADDR"),
                                        user_agent=request.META.get("HTTP_USER_AGENT", "")), "secure_body")
