"""The knowledge operations agents call (seed 003), declared once for REST, MCP and the audit.

Each handler takes the caller and the validated fields of its input serializer and
returns a `Knowledge` (rendered by `KnowledgeSerializer`) or a JSON-ready dict. The
REST views (`api.views`) and the MCP tools (`api.mcp_server`) run them
by name through `agents.operations.run`, so both get the same filter chain,
validation, permissions and audit.
"""
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q, prefetch_related_objects
from django.http import Http404
from django.utils.translation import gettext as _
from rest_framework.exceptions import PermissionDenied, ValidationError

from agents.caller import Caller
from agents.operations import operation
from knowledge import conflicts, evolve, feedback, search_log, selectors, serializers, services, slim
from knowledge import inputs, outputs
from core.errors import error_payload, invalid_fields
from knowledge.pagination import encode_cursor
from core.safe_json import text_problem
from knowledge.models import Knowledge
from knowledge.search import engine, result_cache
from knowledge.search.filters import VALID_OPERATORS, valid_filter_keys
from knowledge.search.filters import for_caller as filters_for_caller
from knowledge.search.rerank import Gate
from knowledge.serializers import KnowledgeSerializer, tags_problem

SEARCH_ID_UNSEEN = "no search with this id is visible to this caller"
FILTER_EXAMPLE = {"op": "AND", "conditions": [
    {"op": "EQ", "key": "tags.domain", "value": "coding_style"},
    {"op": "GTE", "key": "score", "value": 3},
]}


def job_link(job) -> dict:
    return {"id": str(job.id), "status": job.status, "url": f"/api/jobs/{job.id}"}


def visible_item(caller: Caller, knowledge_id, *, related: bool = False, cases: int | None = None) -> Knowledge:
    """The item if `caller` may read it; Http404 otherwise (unknown and unreadable look the same).

    `related` loads its resource links and feedback histories too, in one query (`selectors.knowledge_visible`):
    every case, or each history's newest `cases`; for a reply rendered from this object. A check followed by a
    write reloads the item after the write instead."""
    if not isinstance(knowledge_id, str) or text_problem(knowledge_id):  # no such id can exist
        raise Http404
    if related:
        item = selectors.knowledge_visible(knowledge_id=knowledge_id, readable_scopes=caller.readable_scopes,
                                           cases=cases)
    else:
        item = Knowledge.objects.visible_to(caller).filter(pk=knowledge_id).first()
    if item is None:
        raise Http404
    return item


def changeable_item(caller: Caller, knowledge_id) -> Knowledge:
    """The item, if the caller owns it or curates and may write one of its scopes (404 / 403 otherwise):
    the rule for editing, restoring, archiving and rolling back."""
    item = visible_item(caller, knowledge_id)
    if not caller.edits_any and item.owner != caller.principal:
        raise PermissionDenied(_("only the owner (%(owner)s) or a curator may change this item; "
                                 "give feedback with PUT instead") % {"owner": item.owner})
    if not caller.may_write_any(item.scopes):
        raise PermissionDenied(_("changing this item needs write access to one of its scopes"))
    return item


def search_result(item: Knowledge, hit) -> dict:
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
    if item.superseded_by_id:
        row["superseded_by"] = item.superseded_by_id
    return row


@dataclass(frozen=True)
class RankedReply:
    """A search's rows as the engine ranked them, and each row's explanation (shown on request), without the
    search_id: what `result_cache` keeps. Read-only: it serves many requests."""

    rows: tuple[dict, ...]
    explanations: tuple[dict, ...]
    notes: tuple = ()  # lazy: rendered in the language of whoever asked

    @classmethod
    def of(cls, result: engine.SearchResult, *, visible) -> "RankedReply":
        items = result.ordered_items()  # the engine already loaded them; only their resource links are missing
        prefetch_related_objects(items, "resource_links")
        rows = [search_result(item, hit) for item, hit in zip(items, result.hits)]
        flagged = conflicts.open_conflicts_of([row["id"] for row in rows], visible=visible)
        for row in rows:
            if row["id"] in flagged:
                row["conflicts"] = flagged[row["id"]]
        return cls(rows=tuple(rows), explanations=tuple(hit.explanation for hit in result.hits), notes=tuple(result.notes))


@operation("knowledge_search", input=inputs.SearchInput, output=outputs.SearchOutput)
def knowledge_search(caller: Caller, *, q, top_k, min_score, types, scopes, filters, rank, explain,
                     answer_floor, relevance_floor, relevance_ratio, include_superseded=False) -> dict:
    """Search: hybrid retrieval, the relevance gate, then the quality rerank; logged as `search_id`.

    A search asked before, with nothing written since, is answered from `result_cache`."""
    filters = filters_for_caller(caller, filters)  # the token's static filters AND the request's, parsed once
    params = dict(
        query=q, top_k=top_k, min_score=min_score, types=types, scopes=scopes,
        filters=filters, readable_scopes=caller.readable_scopes, rank=rank,
        statuses=("active", "superseded") if include_superseded else ("active",),
        gate=Gate(answer=answer_floor, floor=relevance_floor, relative=relevance_ratio),
    )

    def run() -> tuple[RankedReply, bool]:
        result = engine.search(**params)
        return RankedReply.of(result, visible=Knowledge.objects.visible_to(caller)), not result.degraded

    ranked = result_cache.cached(params, run)
    results = [dict(row, explanation=explanation) if explain else dict(row)
               for row, explanation in zip(ranked.rows, ranked.explanations)]
    body = {"results": results, "count": len(results)}
    log = search_log.search_log_record(
        principal=caller.principal, readable_scopes=caller.readable_scopes, filters=filters,
        query=q, top_k=top_k, min_score=min_score, types=types, scopes=scopes, rank=rank,
        result_ids=[row["id"] for row in results])
    body["search_id"] = str(log.pk)
    if explain and ranked.notes:
        body["notes"] = [str(note) for note in ranked.notes]  # in the caller's Accept-Language
    return body


@operation("knowledge_list", input=inputs.KnowledgeListInput, output=outputs.ListOutput)
def knowledge_list(caller: Caller, *, limit, types, scopes, cursor) -> dict:
    """Active items newest first, cursor-paginated."""
    items = selectors.knowledge_with_relations().visible_to(caller).filter(status="active").order_by("-created_at", "-id")
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
        "results": page,
        "count": len(page),
        "next": encode_cursor(page[-1].created_at, page[-1].id) if more else None,
    }


@operation("knowledge_get", output=KnowledgeSerializer)
def knowledge_get(caller: Caller, *, knowledge_id) -> Knowledge:
    """One item in the seed's shape; 404 unless the caller may read it."""
    return visible_item(caller, knowledge_id, related=True)


@operation("knowledge_filters", output=outputs.FiltersOutput)
def knowledge_filters(caller: Caller) -> dict:
    """The filter keys and operators valid for this caller, with sample values from the items it can see."""
    keys = valid_filter_keys(Knowledge.objects.visible_to(caller).filter(status="active"))
    return {"operators": list(VALID_OPERATORS), "keys": keys, "static_filters": caller.static_filters,
            "example": FILTER_EXAMPLE}


@operation("knowledge_save", input=inputs.KnowledgeCreateInput, output=KnowledgeSerializer, writes=True,
           permission="write", status=201)
def knowledge_save(caller: Caller, **data) -> Knowledge:
    """Save a new item; scopes default to the caller's first writable scope, owner to the caller."""
    scopes = caller.scopes_to_write(data.pop("scopes", None))
    source = {"agent_id": caller.agent_id, **data.pop("source", {})}
    return services.knowledge_create(caller, scopes=scopes, source=source, **data)


def cited_search(caller: Caller, search_id):
    """The id of the visible search that feedback cites, None without one; 400 for any other id."""
    if search_id is None:
        return None
    log = search_log.search_log_visible(readable_scopes=caller.readable_scopes, search_id=search_id)
    if log is None:  # unknown, expired or another scope's: the same answer, so ids do not leak
        raise ValidationError({"search_id": [SEARCH_ID_UNSEEN]})
    return log.pk


@operation("knowledge_update", input=inputs.KnowledgeUpdateInput, writes=True, permission="feedback")
def knowledge_update(caller: Caller, *, knowledge_id, add_helpful_case=None, add_harmful_case=None,
                     update_score=None, evolve_feedback=None, search_id=None) -> dict:
    """Feedback (seed 003's PUT): a helpful or harmful case, a new score, or an evolve request (a job).

    The reply is read in one query before the writes (`feedback_reply`: the newest cases of each history, not
    all), and the writes end with the counters' UPDATE, whose row lock is then held only until the commit."""
    item = visible_item(caller, knowledge_id, related=True, cases=serializers.REPLY_CASES + 1)
    if (update_score is not None or evolve_feedback) and not caller.may_write_any(item.scopes):
        raise PermissionDenied(_("changing the score or evolving needs write access to one of the item's scopes"))
    search_id = cited_search(caller, search_id)
    reported = []
    with transaction.atomic(savepoint=False):  # inside the chain's transaction: no savepoint of its own
        job = evolve.evolve_request(caller, knowledge_id=item.id, feedback=evolve_feedback) if evolve_feedback else None
        if update_score is not None:
            item.score, item.updated_at = update_score, feedback.score_set(caller, knowledge_id=item.id, score=update_score)
        for helpful, case in ((True, add_helpful_case), (False, add_harmful_case)):
            if case is not None:
                stored, tally = feedback.feedback_record(caller, knowledge_id=item.id, helpful=helpful, case=case,
                                                         search_id=search_id)
                reported.append(stored)
                item.helpful, item.harmful, item.score, item.updated_at = (tally.helpful, tally.harmful, tally.score,
                                                                           tally.updated_at)
    body = serializers.feedback_reply(item, reported)
    if job is not None:
        body["job"] = job_link(job)
    return body


def _entry_failed(position: int, knowledge_id, code: str, message: str, fields) -> dict:
    return {"index": position, "knowledge_id": knowledge_id, "ok": False, "error": error_payload(code, message, fields)}


@operation("knowledge_batch_update", input=inputs.BatchUpdateInput, output=outputs.BatchOutput, writes=True,
           permission="feedback")
def knowledge_batch_update(caller: Caller, *, feedback_list) -> dict:
    """Many helpful/harmful reports; per-entry results, so one bad entry does not lose the good ones."""
    results: list[dict | None] = [None] * len(feedback_list)
    entries = []  # (position, validated entry) of the well-formed ones
    for position, raw in enumerate(feedback_list):
        entry = inputs.FeedbackEntry(data=raw)
        if entry.is_valid():
            entries.append((position, entry.validated_data))
        else:
            message, _ = invalid_fields(entry.errors)
            results[position] = _entry_failed(position, _raw_id(raw), "invalid", f"feedback_list.{position}.{message}",
                                               entry.errors)
    wanted = {data["knowledge_id"] for _, data in entries}
    visible = set(Knowledge.objects.visible_to(caller).filter(pk__in=wanted).values_list("pk", flat=True))
    searches: dict = {}  # search_id -> the cited search's pk, or the ValidationError citing it raised
    reports = []
    for position, data in entries:
        knowledge_id, sent_id = data["knowledge_id"], _raw_id(feedback_list[position])
        if knowledge_id not in visible:
            results[position] = _entry_failed(position, sent_id, "not_found", f"no knowledge item {knowledge_id}", {})
            continue
        if data["search_id"] not in searches:
            try:
                searches[data["search_id"]] = cited_search(caller, data["search_id"])
            except ValidationError as exc:
                searches[data["search_id"]] = exc
        search_id = searches[data["search_id"]]
        if isinstance(search_id, ValidationError):
            results[position] = _entry_failed(position, sent_id, "invalid",
                                              f"feedback_list.{position}.search_id: {SEARCH_ID_UNSEEN}", search_id.detail)
            continue
        reports.append((position, {"knowledge_id": knowledge_id, "helpful": data["is_helpful"], "case": data["case"],
                                   "search_id": search_id}))
    landed = feedback.feedback_record_batch(caller, [report for _, report in reports])
    for (position, _report), ok in zip(reports, landed):
        sent_id = _raw_id(feedback_list[position])
        results[position] = ({"index": position, "knowledge_id": sent_id, "ok": True} if ok else
                             _entry_failed(position, sent_id, "invalid", "the database refused this entry; it was not stored", {}))
    failed = sum(1 for r in results if not r["ok"])
    return {"results": results, "succeeded": len(results) - failed, "failed": failed}


def _raw_id(raw):
    """An entry's knowledge_id as sent, when it is a string (for the entry's result)."""
    knowledge_id = raw.get("knowledge_id") if isinstance(raw, dict) else None
    return knowledge_id if isinstance(knowledge_id, str) else None


@operation("knowledge_edit", input=inputs.KnowledgePatchInput, output=KnowledgeSerializer, writes=True,
           permission="write")
def knowledge_edit(caller: Caller, *, knowledge_id, reason, base_updated_at=None, **changes) -> Knowledge:
    """Edit an item's text, tags or types (its owner, or a curator); the old text is kept as a version.

    With `base_updated_at` (the `updated_at` the caller read) an item changed since is 409, not overwritten."""
    if not changes:  # the input requires a change besides the reason; the precondition is none either
        raise ValidationError({"non_field_errors": ["give at least one of task, content, tags, types"]})
    item = changeable_item(caller, knowledge_id)
    problem = tags_problem(changes["tags"], kept=item.tags) if changes.get("tags") is not None else None
    if problem:
        raise ValidationError({"tags": [problem]})
    services.knowledge_edit(caller, knowledge_id=item.id, reason=reason, base_updated_at=base_updated_at, **changes)
    return selectors.knowledge_get(knowledge_id=item.id)


@operation("knowledge_slim", input=inputs.SlimInput, output=outputs.JobRef, writes=True, permission="write",
           status=202)
def knowledge_slim(caller: Caller, *, model, dry_run) -> dict:
    """Queue a merge of near-duplicates within the caller's writable scopes (a job)."""
    job = slim.slim_request(caller, model=model or None, dry_run=dry_run)
    return {"job": job_link(job)}
