"""Agent API views: validate, call a service or selector through the filter chain, serialize."""
from django.db.models import Q, prefetch_related_objects
from django.http import Http404
from rest_framework import status
from django.db import DataError, IntegrityError, transaction
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from drf_spectacular.utils import extend_schema
from rest_framework.views import APIView

from agents.caller import NO_ROLE, Caller, caller_for_request
from agents.chain import invoke
from knowledge import selectors, services
from knowledge.api import schema
from knowledge.api.pagination import encode_cursor
from knowledge import evolve, feedback, search_log, slim
from knowledge.api.errors import error_payload, first_message, first_path
from knowledge.api.idempotency import idempotent_response
from knowledge.api.safe_json import text_problem
from knowledge.api.serializers import (
    BatchUpdateInput, FeedbackEntry, KnowledgeCreateInput, KnowledgeListInput, KnowledgePatchInput, KnowledgeUpdateInput,
    SearchInput, SlimInput,
)
from knowledge.models import Knowledge
from knowledge.search import engine
from knowledge.search.rerank import ANSWER_FLOOR, RELATIVE_FLOOR, RELEVANCE_FLOOR, Gate
from knowledge.search.filters import VALID_OPERATORS, valid_filter_keys
from knowledge.serializers import KnowledgeSerializer


def job_link(job) -> dict:
    return {"id": str(job.id), "status": job.status, "url": f"/api/jobs/{job.id}"}


def caller_of(request) -> Caller:
    """The request's caller: its agent token, or its user's role (403 for a user without one)."""
    caller = caller_for_request(request)
    if not caller.has_role:
        raise PermissionDenied(NO_ROLE)
    return caller


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
        "relevance": round(hit.relevance, 4),
    }
    if explain:
        row["explanation"] = hit.explanation
    return row


def _search(*, q, top_k, min_score, types, scopes, filters, rank, explain, context,
            answer_floor=ANSWER_FLOOR, relevance_floor=RELEVANCE_FLOOR, relevance_ratio=RELATIVE_FLOOR):
    caller: Caller = context["caller"]
    result = engine.search(
        query=q, top_k=top_k, min_score=min_score, types=types, scopes=scopes,
        filters=caller.search_filters(filters), readable_scopes=caller.readable_scopes, rank=rank,
        gate=Gate(answer=answer_floor, floor=relevance_floor, relative=relevance_ratio),
    )
    hits = result.ordered_items()  # the engine already loaded them; only their resource links are missing
    prefetch_related_objects(hits, "resource_links")
    results = [search_result(item, hit, explain) for item, hit in zip(hits, result.hits)]
    body = {"results": results, "count": len(results)}
    body["search_id"] = _log_search(caller, query=q, top_k=top_k, min_score=min_score, types=types, scopes=scopes,
                                    filters=filters, rank=rank, result_ids=[hit.id for hit in result.hits])
    if explain and result.notes:
        body["notes"] = result.notes
    return body


def _log_search(caller: Caller, *, filters, **search) -> str:
    """Log an agent's search (knowledge.search_log); its id is the reply's `search_id`."""
    log = search_log.search_log_record(principal=caller.principal, readable_scopes=caller.readable_scopes,
                                       filters=caller.search_filters(filters), **search)
    return str(log.pk)


SEARCH_ID_UNSEEN = "no search with this id is visible to this caller"


def _cited_search(caller: Caller, search_id):
    """The id of the visible search that feedback cites, None without one; 400 for any other id."""
    if search_id is None:
        return None
    log = search_log.search_log_visible(readable_scopes=caller.readable_scopes, search_id=search_id)
    if log is None:  # unknown, expired or another scope's: the same answer, so ids do not leak
        raise ValidationError({"search_id": [SEARCH_ID_UNSEEN]})
    return log.pk


class KnowledgeSearchApi(APIView):
    """GET /api/knowledge/search?q=&top_k=5&min_score=3&types=a,b (POST: the same as JSON)."""

    @extend_schema(parameters=[SearchInput], responses={200: schema.SearchOutput, **schema.ERRORS})
    def get(self, request):
        return self._run(request, request.query_params)

    @extend_schema(request=SearchInput, responses={200: schema.SearchOutput, **schema.BODY_ERRORS})
    def post(self, request):
        return self._run(request, request.data)

    def _run(self, request, data):
        return Response(invoke("knowledge_search", _search, {"data": data}, {"caller": caller_of(request)}))


def _create(*, context, **data):
    caller: Caller = context["caller"]
    if caller.read_only:
        raise PermissionDenied("read-only access: saving needs the curator role or a token with write scopes")
    scopes = data.pop("scopes", None) or list(caller.writable_scopes or ())[:1]
    if not scopes:
        raise PermissionDenied("this token may not write to any scope" if caller.writable_scopes is not None
                               else "name the scopes to save to (a person has no default scope)")
    refused = caller.may_write(scopes)
    if refused:
        raise PermissionDenied(f"this caller may not write to scope(s): {', '.join(refused)}")
    source = {"agent_id": caller.agent_id, **data.pop("source", {})}
    owner = data.pop("owner", None) or caller.principal
    return services.knowledge_create(scopes=scopes, owner=owner, source=source, reader_scopes=caller.readable_scopes, **data)


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

    @extend_schema(operation_id="knowledge_list", parameters=[KnowledgeListInput], responses={200: schema.ListOutput, **schema.ERRORS})
    def get(self, request):
        return Response(invoke("knowledge_list", _list, {"data": request.query_params}, {"caller": caller_of(request)}))

    @extend_schema(request=KnowledgeCreateInput, responses={201: KnowledgeSerializer, **schema.WRITE_ERRORS})
    def post(self, request):
        caller = caller_of(request)

        def save():
            item = invoke("knowledge_save", _create, {"data": request.data}, {"caller": caller})
            return status.HTTP_201_CREATED, KnowledgeSerializer(selectors.knowledge_get(knowledge_id=item.id)).data

        return idempotent_response(request, caller, "knowledge_save", save)


def _visible_item(caller: Caller, knowledge_id: str) -> Knowledge:
    if not isinstance(knowledge_id, str) or text_problem(knowledge_id):  # no such id can exist (MCP passes any text)
        raise Http404
    item = visible_to(caller).filter(pk=knowledge_id).first()
    if item is None:
        raise Http404
    return item


def _update(*, knowledge_id, context, add_helpful_case=None, add_harmful_case=None, update_score=None,
            evolve_feedback=None, search_id=None):
    caller: Caller = context["caller"]
    item = _visible_item(caller, knowledge_id)
    if caller.read_only:
        raise PermissionDenied("read-only access: feedback, score and evolve need the curator role")
    if (update_score is not None or evolve_feedback) and not caller.may_write_any(item.scopes):
        raise PermissionDenied("changing the score or evolving needs write access to one of the item's scopes")
    search_id = _cited_search(caller, search_id)
    with transaction.atomic():
        job = evolve.evolve_request(knowledge_id=item.id, feedback=evolve_feedback, requested_by=caller.principal) if evolve_feedback else None
        if add_helpful_case is not None:
            feedback.feedback_record(knowledge_id=item.id, helpful=True, case=add_helpful_case, reported_by=caller.principal,
                                     search_id=search_id)
        if add_harmful_case is not None:
            feedback.feedback_record(knowledge_id=item.id, helpful=False, case=add_harmful_case, reported_by=caller.principal,
                                     search_id=search_id)
        if update_score is not None:
            feedback.score_set(knowledge_id=item.id, score=update_score)
    body = KnowledgeSerializer(selectors.knowledge_get(knowledge_id=item.id)).data
    if job is not None:
        body["job"] = job_link(job)
    return body


def _batch_update(*, feedback_list, context):
    caller: Caller = context["caller"]
    if caller.read_only:
        raise PermissionDenied("read-only access: feedback needs the curator role")
    results = []
    for position, raw in enumerate(feedback_list):
        entry = FeedbackEntry(data=raw)
        knowledge_id = raw.get("knowledge_id") if isinstance(raw, dict) else None
        knowledge_id = knowledge_id if isinstance(knowledge_id, str) else None
        if not entry.is_valid():
            name, messages = first_path(error_payload("invalid", "", entry.errors)["fields"])
            message = f"feedback_list.{position}.{name}: {first_message(messages)}"
            results.append({"index": position, "knowledge_id": knowledge_id, "ok": False,
                            "error": error_payload("invalid", message, entry.errors)})
            continue
        data = entry.validated_data
        if not visible_to(caller).filter(pk=data["knowledge_id"]).exists():
            results.append({"index": position, "knowledge_id": knowledge_id, "ok": False,
                            "error": error_payload("not_found", f"no knowledge item {data['knowledge_id']}", {})})
            continue
        try:
            search_id = _cited_search(caller, data["search_id"])
        except ValidationError as exc:
            results.append({"index": position, "knowledge_id": knowledge_id, "ok": False, "error": error_payload(
                "invalid", f"feedback_list.{position}.search_id: {SEARCH_ID_UNSEEN}", exc.detail)})
            continue
        try:
            with transaction.atomic():  # a savepoint: an entry the database refuses leaves the others standing
                feedback.feedback_record(knowledge_id=data["knowledge_id"], helpful=data["is_helpful"],
                                         case=data["case"], reported_by=caller.principal, search_id=search_id)
        except (DataError, IntegrityError):
            results.append({"index": position, "knowledge_id": knowledge_id, "ok": False,
                            "error": error_payload("invalid", "the database refused this entry; it was not stored", {})})
            continue
        results.append({"index": position, "knowledge_id": knowledge_id, "ok": True})
    failed = sum(1 for r in results if not r["ok"])
    return {"results": results, "succeeded": len(results) - failed, "failed": failed}


def _edit(*, knowledge_id, reason, context, **changes):
    caller: Caller = context["caller"]
    item = _visible_item(caller, knowledge_id)
    if not caller.edits_any and item.owner != caller.principal:
        raise PermissionDenied(f"only the owner ({item.owner}) may edit this item; give feedback with PUT instead")
    if not caller.may_write_any(item.scopes):
        raise PermissionDenied("editing needs write access to one of the item's scopes")
    services.knowledge_edit(knowledge_id=item.id, changed_by=caller.principal, reason=reason, **changes)
    return selectors.knowledge_get(knowledge_id=item.id)


class KnowledgeDetailApi(APIView):
    """GET /api/knowledge/{id}; PUT: feedback cases and score (seed 003). 404 unless readable."""

    @extend_schema(operation_id="knowledge_get", responses={200: KnowledgeSerializer, **schema.ERRORS})
    def get(self, request, knowledge_id):
        return Response(KnowledgeSerializer(_visible_item(caller_of(request), knowledge_id)).data)

    @extend_schema(request=KnowledgeUpdateInput, responses={200: KnowledgeSerializer, **schema.WRITE_ERRORS})
    def put(self, request, knowledge_id):
        args = {"knowledge_id": knowledge_id, "data": request.data}
        return Response(invoke("knowledge_update", _update, args, {"caller": caller_of(request)}))


    @extend_schema(request=KnowledgePatchInput, responses={200: KnowledgeSerializer, **schema.BODY_ERRORS})
    def patch(self, request, knowledge_id):
        args = {"knowledge_id": knowledge_id, "data": request.data}
        return Response(KnowledgeSerializer(invoke("knowledge_edit", _edit, args, {"caller": caller_of(request)})).data)


class KnowledgeBatchUpdateApi(APIView):
    """POST /api/knowledge/batch_update: per-entry results; one bad entry does not lose the good ones."""

    @extend_schema(request=schema.BatchUpdateRequest, responses={200: schema.BatchOutput, **schema.BODY_ERRORS})
    def post(self, request):
        return Response(invoke("knowledge_batch_update", _batch_update, {"data": request.data}, {"caller": caller_of(request)}))


class KnowledgeFiltersApi(APIView):
    """GET /api/knowledge/filters: the filter keys and operators valid for this agent, with sample values."""

    @extend_schema(responses={200: schema.FiltersOutput, **schema.ERRORS})
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


def _slim(*, model, dry_run, context):
    caller: Caller = context["caller"]
    if caller.read_only or (caller.writable_scopes is not None and not caller.writable_scopes):
        raise PermissionDenied("slim merges items: this caller may not write to any scope")
    job = slim.slim_request(model=model or None, dry_run=dry_run, requested_by=caller.principal,
                            writable_scopes=None if caller.writable_scopes is None else list(caller.writable_scopes))
    return {"job": job_link(job)}


class KnowledgeSlimApi(APIView):
    """POST /api/knowledge/slim: queue a merge of near-duplicates within the token's writable scopes (202)."""

    @extend_schema(request=SlimInput, responses={202: schema.JobRef, **schema.WRITE_ERRORS})
    def post(self, request):
        body = invoke("knowledge_slim", _slim, {"data": request.data}, {"caller": caller_of(request)})
        return Response(body, status=status.HTTP_202_ACCEPTED)
