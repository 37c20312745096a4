"""Agent API views: each HTTP method runs one registered operation (knowledge.operations) by name."""
from django.utils.translation import gettext as _
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import operations
from agents.caller import NO_ROLE, Caller, caller_for_request
from api import schema
from api.idempotency import idempotent_response
from core.fields import TRANSPORT_PARAMETERS
from knowledge.inputs import (
    BulkSaveInput, KnowledgeCreateInput, KnowledgeListInput, KnowledgePatchInput, KnowledgeUpdateInput, SearchInput, SlimInput,
)
from knowledge.serializers import KnowledgeSerializer


def caller_of(request) -> Caller:
    """The request's caller: its agent token, or its user's role (403 for a user without one)."""
    caller = caller_for_request(request)
    if not caller.has_role:
        raise PermissionDenied(NO_ROLE)
    return caller


def check_query(request, allowed: tuple[str, ...] = ()) -> None:
    """A GET by id takes only the `allowed` query parameters, each once, as an input with `NoUnknownFields` does:
    400 naming any other (a typo such as `?revael=true` answered without the secret) and any given twice
    (`reveal=true&reveal=false` silently took the last)."""
    if fields := query_problems(request.query_params, allowed):
        raise ValidationError(fields)


def query_problems(params, allowed: tuple[str, ...], *, lists: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """What `check_query` refuses in `params`, by parameter: one not `allowed` (nor a transport parameter), and one
    given more than once but for `lists`, whose repeats are their items."""
    expected = ", ".join(allowed) or _("none")
    fields = {key: [_("unknown field; expected one of %(expected)s") % {"expected": expected}]
              for key in params if key not in allowed and key not in TRANSPORT_PARAMETERS}
    fields.update({key: [_("given more than once")] for key in params
                   if key not in fields and key not in lists and len(params.getlist(key)) > 1})
    return fields


def reply(request, name: str, *, data=None, **args) -> Response:
    """Run operation `name` for the request's caller; the operation's status on success."""
    op = operations.get(name)
    return Response(operations.run(name, caller_of(request), data=data, **args), status=op.status)


def idempotent_reply(request, name: str, *, data=None, **args) -> Response:
    """`reply`, replayed for a repeated `Idempotency-Key` (saves and feedback)."""
    caller = caller_of(request)
    op = operations.get(name)
    return idempotent_response(request, caller, name,
                               lambda: (op.status, operations.run(name, caller, data=data, **args)), about=args or None)


class KnowledgeSearchApi(APIView):
    """GET /api/knowledge/search?q=&top_k=5&min_score=3&types=a,b (POST: the same as JSON)."""

    @schema.for_operation("knowledge_search", parameters=[SearchInput], responses={200: schema.SearchOutput, **schema.ERRORS})
    def get(self, request):
        return reply(request, "knowledge_search", data=request.query_params)

    @schema.for_operation("knowledge_search", request=SearchInput, responses={200: schema.SearchOutput, **schema.BODY_ERRORS})
    def post(self, request):
        return reply(request, "knowledge_search", data=request.data)


class KnowledgeCollectionApi(APIView):
    """GET /api/knowledge: newest first, cursor-paginated. POST: save a new item (201)."""

    @schema.for_operation("knowledge_list", operation_id="knowledge_list", parameters=[KnowledgeListInput], responses={200: schema.ListOutput, **schema.ERRORS})
    def get(self, request):
        return reply(request, "knowledge_list", data=request.query_params)

    @schema.for_operation("knowledge_save", request=KnowledgeCreateInput, responses={201: KnowledgeSerializer, **schema.WRITE_ERRORS})
    def post(self, request):
        return idempotent_reply(request, "knowledge_save", data=request.data)


class KnowledgeBulkApi(APIView):
    """POST /api/knowledge/bulk: up to 500 new items, per-item results; `Idempotency-Key` as for single saves."""

    @schema.for_operation("knowledge_bulk_save", request=BulkSaveInput, responses={200: schema.BatchOutput, **schema.WRITE_ERRORS})
    def post(self, request):
        return idempotent_reply(request, "knowledge_bulk_save", data=request.data)


class KnowledgeDetailApi(APIView):
    """GET /api/knowledge/{id}; PUT: feedback cases and score (seed 003); PATCH: edit. 404 unless readable."""

    @schema.for_operation("knowledge_get", operation_id="knowledge_get", responses={200: KnowledgeSerializer, **schema.ERRORS})
    def get(self, request, knowledge_id):
        check_query(request)
        return reply(request, "knowledge_get", knowledge_id=knowledge_id)

    @schema.for_operation("knowledge_update", request=KnowledgeUpdateInput, responses={200: schema.FeedbackOutput, **schema.WRITE_ERRORS})
    def put(self, request, knowledge_id):
        return idempotent_reply(request, "knowledge_update", data=request.data, knowledge_id=knowledge_id)

    @schema.for_operation("knowledge_edit", request=KnowledgePatchInput, responses={200: KnowledgeSerializer, **schema.WRITE_ERRORS})
    def patch(self, request, knowledge_id):
        return reply(request, "knowledge_edit", data=request.data, knowledge_id=knowledge_id)


class KnowledgeBatchUpdateApi(APIView):
    """POST /api/knowledge/batch_update: per-entry results; one bad entry does not lose the good ones."""

    @schema.for_operation("knowledge_batch_update", request=schema.BatchUpdateRequest, responses={200: schema.BatchOutput, **schema.BODY_ERRORS})
    def post(self, request):
        return idempotent_reply(request, "knowledge_batch_update", data=request.data)


class KnowledgeFiltersApi(APIView):
    """GET /api/knowledge/filters: the filter keys and operators valid for this agent, with sample values."""

    @schema.for_operation("knowledge_filters", responses={200: schema.FiltersOutput, **schema.ERRORS})
    def get(self, request):
        return reply(request, "knowledge_filters")


class KnowledgeSlimApi(APIView):
    """POST /api/knowledge/slim: queue a merge of near-duplicates within the token's writable scopes (202)."""

    @schema.for_operation("knowledge_slim", request=SlimInput, responses={202: schema.JobRef, **schema.WRITE_ERRORS})
    def post(self, request):
        return reply(request, "knowledge_slim", data=request.data)
