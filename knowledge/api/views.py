"""Agent API views: validate, call a service or selector through the filter chain, serialize."""
from django.db.models import Q
from django.http import Http404
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.caller import Caller
from agents.chain import invoke
from knowledge import selectors, services
from knowledge.api.pagination import encode_cursor
from knowledge.api.serializers import KnowledgeCreateInput, KnowledgeListInput, SearchInput
from knowledge.models import Knowledge
from knowledge.search import engine
from knowledge.search.filters import AND, VALID_OPERATORS, parse_filter, valid_filter_keys
from knowledge.serializers import KnowledgeSerializer


def caller_of(request) -> Caller:
    token = getattr(request.user, "token", None)
    return Caller.for_token(token) if token is not None else Caller.for_user(request.user)


def search_result(item: Knowledge, hit, explain: bool) -> dict:
    row = {
        "id": item.id,
        "task": item.task,
        "content": item.content,
        "types": list(item.types),
        "tags": dict(item.tags),
        "scopes": list(item.scopes),
        "owner": item.owner,
        "resource_ids": item.resource_ids,
        "eval": {"score": item.score, "helpful": item.helpful, "harmful": item.harmful, "confidence": item.confidence},
        "quality_score": hit.quality_score,
    }
    if explain:
        row["explanation"] = hit.explanation
    return row


def _search(*, q, top_k, min_score, types, scopes, filters, rank, explain, context):
    caller: Caller = context["caller"]
    combined = [f for f in (caller.static_filters and parse_filter(caller.static_filters), filters) if f]
    result = engine.search(
        query=q, top_k=top_k, min_score=min_score, types=types, scopes=scopes,
        filters=AND(*combined) if combined else None, readable_scopes=caller.readable_scopes, rank=rank,
    )
    items = {i.id: i for i in Knowledge.objects.filter(pk__in=[h.id for h in result.hits]).prefetch_related("resource_links")}
    results = [search_result(items[h.id], h, explain) for h in result.hits]
    body = {"results": results, "count": len(results)}
    if explain and result.notes:
        body["notes"] = result.notes
    return body


class KnowledgeSearchApi(APIView):
    """GET /api/knowledge/search?q=&top_k=5&min_score=3&types=a,b (POST: the same as JSON)."""

    def get(self, request):
        return self._run(request, request.query_params)

    def post(self, request):
        return self._run(request, request.data)

    def _run(self, request, data):
        params = SearchInput(data=data)
        params.is_valid(raise_exception=True)
        body = invoke("knowledge_search", _search, dict(params.validated_data), {"caller": caller_of(request)})
        return Response(body)


def _create(*, context, **data):
    caller: Caller = context["caller"]
    scopes = data.pop("scopes", None) or list(caller.writable_scopes or ())[:1]
    if not scopes:
        raise PermissionDenied("this token may not write to any scope")
    refused = caller.may_write(scopes)
    if refused:
        raise PermissionDenied(f"this token may not write to scope(s): {', '.join(refused)}")
    source = {"agent_id": caller.agent_id, **data.pop("source", {})}
    owner = data.pop("owner", None) or caller.principal
    return services.knowledge_create(scopes=scopes, owner=owner, source=source, **data)


def visible_to(caller: Caller):
    items = selectors.knowledge_with_relations()
    if caller.readable_scopes is not None:
        items = items.filter(scopes__overlap=list(caller.readable_scopes))
    return items


def _list(*, limit, types, scopes, cursor, context):
    items = visible_to(context["caller"]).filter(status="active").order_by("-created_at", "-id")
    if types:
        items = items.filter(types__overlap=types)
    if scopes:
        items = items.filter(scopes__overlap=scopes)
    if cursor:
        created_at, last_id = cursor
        items = items.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=last_id))
    page = list(items[: limit + 1])
    more, page = len(page) > limit, page[:limit]
    return {
        "results": [KnowledgeSerializer(item).data for item in page],
        "count": len(page),
        "next": encode_cursor(page[-1].created_at, page[-1].id) if more else None,
    }


class KnowledgeCollectionApi(APIView):
    """GET /api/knowledge: newest first, cursor-paginated. POST: save a new item (201)."""

    def get(self, request):
        params = KnowledgeListInput(data=request.query_params)
        params.is_valid(raise_exception=True)
        return Response(invoke("knowledge_list", _list, dict(params.validated_data), {"caller": caller_of(request)}))

    def post(self, request):
        params = KnowledgeCreateInput(data=request.data)
        params.is_valid(raise_exception=True)
        item = invoke("knowledge_save", _create, dict(params.validated_data), {"caller": caller_of(request)})
        return Response(KnowledgeSerializer(selectors.knowledge_get(knowledge_id=item.id)).data, status=status.HTTP_201_CREATED)


class KnowledgeDetailApi(APIView):
    """GET /api/knowledge/{id}: 404 unless one of the item's scopes is readable."""

    def get(self, request, knowledge_id):
        item = visible_to(caller_of(request)).filter(pk=knowledge_id).first()
        if item is None:
            raise Http404
        return Response(KnowledgeSerializer(item).data)


class KnowledgeFiltersApi(APIView):
    """GET /api/knowledge/filters: the filter keys and operators valid for this agent, with sample values."""

    def get(self, request):
        caller = caller_of(request)
        keys = valid_filter_keys(visible_to(caller).filter(status="active"))
        return Response({
            "operators": list(VALID_OPERATORS),
            "keys": keys,
            "static_filters": caller.static_filters,
            "example": {"op": "AND", "conditions": [
                {"op": "EQ", "key": "tags.domain", "value": "coding_style"},
                {"op": "GTE", "key": "score", "value": 3},
            ]},
        })
