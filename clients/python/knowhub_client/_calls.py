"""Each API operation as a `Call`: built once here, sent by the sync or the async client."""
from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from knowhub_client._transport import Call, check_header
from knowhub_client.errors import InvalidArgument
from knowhub_client.filters import filter_json

# What a server id can hold: knowledge ids (knowledge/ids.py) and UUIDs (jobs, documents, webhooks, deliveries) fit
# `_ID`; resource ids are path-like (resources/models.py RESOURCE_ID_PATTERN). Anything else cannot name an item,
# and sent anyway it could name another endpoint: the server decodes %2F before routing, so
# "knowledge-…/versions" would reach the versions listing.
_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
_RESOURCE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*")


def _segment(value: Any, argument: str, *, path_like: bool = False) -> str:
    """`value` as one URL path segment of its endpoint, or `InvalidArgument` naming `argument` when no id can be it
    (a "/" outside a resource id, "..", "?", a space, ...). A resource id's "/" is sent encoded (%2F)."""
    text = str(value) if isinstance(value, (str, int, uuid.UUID)) and not isinstance(value, bool) else None
    if text is None or not (_RESOURCE_ID if path_like else _ID).fullmatch(text):
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        allowed = "letters, digits, '_', '-', '.' and '/' between parts" if path_like else "letters, digits, '_', '-', '.'"
        raise InvalidArgument(argument, f"{shown} is not an id ({allowed}; not starting with '.')")
    return quote(text, safe="")


def _strings(value: Any, argument: str, *, joined: bool = False) -> list[str] | None:
    """A list-of-text argument: None stays None, one string is a list of it (``types="tool"`` means
    ``["tool"]``, not its letters), and every element must be a string. `joined`: the list is sent comma-joined,
    so an element holding a comma (it would arrive as two) is refused."""
    if value is None:
        return None
    values = [value] if isinstance(value, str) else list(value) if isinstance(value, Iterable) else None
    if values is None or isinstance(value, (dict, bytes)):
        raise InvalidArgument(argument, f"must be a list of strings, not {type(value).__name__}")
    for n, element in enumerate(values):
        if not isinstance(element, str):
            raise InvalidArgument(argument, f"element {n} must be a string, not {type(element).__name__}")
        if joined and "," in element:
            raise InvalidArgument(argument, f"element {n} holds a comma, which would split it in two")
    return values


def _text(value: Any, argument: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(argument, f"must be a string, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(argument, "holds a character that is not Unicode text (a lone surrogate)") from None
    return value


def _flag(value: Any, argument: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(argument, f"must be True or False, not {type(value).__name__}")
    return value


def _conflict_id(value: Any) -> int:
    """A conflict's id (an integer, or its digits as text); anything else is the caller's mistake, named."""
    try:
        if isinstance(value, bool) or int(value) != float(value):
            raise ValueError
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"conflict_id must be an integer, not {value!r}") from None


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


def knowledge_search(query: str, top_k: int, min_score: int, types: list[str] | None, filters: Any,
                     scopes: list[str] | None, rank: str | None, explain: bool, *, answer_floor: float | None = None,
                     relevance_floor: float | None = None, relevance_ratio: float | None = None,
                     include_superseded: bool = False) -> Call:
    body = _drop_none({"q": _text(query, "query"), "top_k": top_k, "min_score": min_score,
                       "types": _strings(types, "types"), "scopes": _strings(scopes, "scopes"),
                       "filters": filter_json(filters), "rank": rank, "explain": explain or None,
                       "answer_floor": answer_floor, "relevance_floor": relevance_floor,
                       "relevance_ratio": relevance_ratio, "include_superseded": include_superseded or None})
    return Call("POST", "/api/knowledge/search", json=body, idempotent=True)  # a search changes nothing


def knowledge_save(*, task: str, content: str, types: list[str], tags: dict[str, str] | None,
                   scopes: list[str] | None, owner: str | None, source_name: str, source_category: str,
                   urls: list[str] | None, agent_id: str | None, submitted_by: str, score: int, message_id: str,
                   resource_ids: list[str] | None, idempotency_key: str | None,
                   secure_resource_id: str | None = None, confidence: float | None = None) -> Call:
    source = _drop_none({"name": source_name, "category": source_category, "urls": _strings(urls, "urls") or [],
                         "agent_id": agent_id, "submitted_by": submitted_by, "message_id": message_id})
    body = _drop_none({"task": task, "content": content, "types": _strings(types, "types"), "tags": tags,
                       "scopes": _strings(scopes, "scopes"), "owner": owner,
                       "resource_ids": _strings(resource_ids, "resource_ids"), "source": source, "score": score,
                       "message_id": message_id, "secure_resource_id": secure_resource_id,
                       "eval": None if confidence is None else {"confidence": confidence}})
    return _keyed(Call("POST", "/api/knowledge", json=body), idempotency_key)


def _keyed(call: Call, key: str | None) -> Call:
    """With an Idempotency-Key the server replays the first reply, so the save (or the report) may be retried."""
    if key:
        check_header("idempotency_key", _text(key, "idempotency_key"))
    return Call(call.method, call.path, json=call.json, idempotent=True,
                headers={"Idempotency-Key": key or str(uuid.uuid4())})


def knowledge_get(knowledge_id: str) -> Call:
    return Call("GET", f"/api/knowledge/{_segment(knowledge_id, 'knowledge_id')}", idempotent=True)


def knowledge_update(knowledge_id: str, add_helpful_case: dict[str, Any] | None, add_harmful_case: dict[str, Any] | None,
                     update_score: int | None, evolve_feedback: str | None, search_id: str | None = None,
                     idempotency_key: str | None = None) -> Call:
    body = _drop_none({"add_helpful_case": add_helpful_case, "add_harmful_case": add_harmful_case,
                       "update_score": update_score, "evolve_feedback": evolve_feedback,
                       "search_id": None if search_id is None else str(search_id)})
    # A case is appended each time it is sent: the key makes a retry replay the first reply instead.
    return _keyed(Call("PUT", f"/api/knowledge/{_segment(knowledge_id, 'knowledge_id')}", json=body), idempotency_key)


def knowledge_edit(knowledge_id: str, task: str | None, content: str | None, tags: dict[str, str] | None,
                   types: list[str] | None, reason: str, base_updated_at: str | None = None) -> Call:
    body = _drop_none({"task": task, "content": content, "tags": tags, "types": _strings(types, "types"),
                       "reason": reason, "base_updated_at": base_updated_at})
    # Not idempotent: every edit keeps a version.
    return Call("PATCH", f"/api/knowledge/{_segment(knowledge_id, 'knowledge_id')}", json=body)


def knowledge_batch_update(feedback_list: list[dict[str, Any]], search_id: str | None = None,
                           idempotency_key: str | None = None) -> Call:
    """`search_id`, when given, goes into every entry that names none of its own."""
    entries = list(feedback_list)
    if search_id is not None:
        entries = [{**entry, "search_id": entry.get("search_id") or str(search_id)} if isinstance(entry, dict) else entry
                   for entry in entries]
    return _keyed(Call("POST", "/api/knowledge/batch_update", json={"feedback_list": entries}), idempotency_key)


def knowledge_bulk_save(items: list[dict[str, Any]], idempotency_key: str | None) -> Call:
    return _keyed(Call("POST", "/api/knowledge/bulk", json={"items": list(items)}), idempotency_key)


def knowledge_list(limit: int, types: list[str] | None, scopes: list[str] | None, cursor: str | None) -> Call:
    return Call("GET", "/api/knowledge", params={"limit": limit, "types": _strings(types, "types", joined=True),
                                                 "scopes": _strings(scopes, "scopes", joined=True), "cursor": cursor},
                idempotent=True)


def knowledge_filters() -> Call:
    return Call("GET", "/api/knowledge/filters", idempotent=True)


def knowledge_slim(model: str, dry_run: bool) -> Call:
    return Call("POST", "/api/knowledge/slim", json={"model": model, "dry_run": dry_run})


def resource_save(*, id: str, title: str, body: str, secure_body: str, content_type: str,
                  metadata: dict[str, Any] | None, scopes: list[str] | None, expires_at: str | None,
                  idempotency_key: str | None) -> Call:
    payload = _drop_none({"id": id, "title": title, "body": body, "secure_body": secure_body,
                          "content_type": content_type, "metadata": metadata or {}, "scopes": _strings(scopes, "scopes"),
                          "expires_at": expires_at})
    return _keyed(Call("POST", "/api/resource", json=payload), idempotency_key)


def resource_get(resource_id: str, reveal: bool) -> Call:
    # One segment even when the id is path-like ("credentials/website_a"): the server decodes %2F back.
    return Call("GET", f"/api/resource/{_segment(resource_id, 'id', path_like=True)}",
                params={"reveal": "true"} if reveal else None, idempotent=True)


def _item_path(knowledge_id: str, action: str) -> str:
    return f"/api/knowledge/{_segment(knowledge_id, 'knowledge_id')}/{action}"


def knowledge_versions(knowledge_id: str) -> Call:
    return Call("GET", _item_path(knowledge_id, "versions"), idempotent=True)


def knowledge_restore_version(knowledge_id: str, version: int) -> Call:
    return Call("POST", _item_path(knowledge_id, "restore"), json={"version": version})


def knowledge_set_status(knowledge_id: str, action: str, reason: str) -> Call:
    """`action` is archive or activate; repeating one changes nothing, so it may be retried."""
    return Call("POST", _item_path(knowledge_id, action), json={"reason": reason}, idempotent=True)


def knowledge_unmerge(knowledge_id: str) -> Call:
    return Call("POST", _item_path(knowledge_id, "unmerge"))


def knowledge_supersede(knowledge_id: str, successor_id: str) -> Call:
    return Call("POST", _item_path(knowledge_id, "supersede"), json={"successor_id": successor_id}, idempotent=True)


def conflict_list(status: str, kind: str | None, knowledge_id: str | None, limit: int, offset: int) -> Call:
    return Call("GET", "/api/conflicts", params=_drop_none({"status": status, "kind": kind, "knowledge_id": knowledge_id,
                                                             "limit": limit, "offset": offset}), idempotent=True)


def conflict_get(conflict_id: int) -> Call:
    return Call("GET", f"/api/conflicts/{_conflict_id(conflict_id)}", idempotent=True)


def conflict_resolve(conflict_id: int, action: str, successor_id: str | None, task: str | None, content: str | None) -> Call:
    return Call("POST", f"/api/conflicts/{_conflict_id(conflict_id)}/resolve",
                json=_drop_none({"action": action, "successor_id": successor_id, "task": task, "content": content}))


def conflict_reopen(conflict_id: int) -> Call:
    return Call("POST", f"/api/conflicts/{_conflict_id(conflict_id)}/reopen")


def evolve_review(job_id: str, action: str) -> Call:
    """`action` is accept or reject (a job awaiting review)."""
    return Call("POST", f"/api/jobs/{_segment(job_id, 'job')}/{action}")


def merge_proposals(status: str = "pending") -> Call:
    return Call("GET", "/api/merges", params={"status": status}, idempotent=True)


def merge_approve(ids: list[str], task: str | None, content: str | None) -> Call:
    return Call("POST", "/api/merges/approve", json=_drop_none({"ids": _strings(ids, "ids"), "task": task, "content": content}))


def merge_reject(ids: list[str]) -> Call:
    return Call("POST", "/api/merges/reject", json={"ids": _strings(ids, "ids")}, idempotent=True)


def evolve_rollback(job_id: str) -> Call:
    return Call("POST", f"/api/jobs/{_segment(job_id, 'job')}/rollback")


def job_get(job_id: str) -> Call:
    return Call("GET", f"/api/jobs/{_segment(job_id, 'job')}", idempotent=True)


def job_id_of(job: str | dict[str, Any]) -> str:
    """A job id from an id, a job, or a reply holding {"job": {...}}."""
    if isinstance(job, dict):
        inner = job.get("job", job)
        if not isinstance(inner, dict) or inner.get("id") in (None, ""):
            raise ValueError(f"not a job: expected a job id, a job, or a reply holding one under 'job'; got keys {sorted(job)}")
        return str(inner["id"])
    return str(job)


TERMINAL_JOB_STATUSES = ("succeeded", "failed")


PASSPHRASE_HEADER = "X-KnowHub-Passphrase"


def knowledge_export(scopes: list[str] | None, passphrase: str | None, vectors: bool = True) -> Call:
    """GET /api/export (JSON Lines, streamed); the passphrase goes in a header, never in the URL."""
    headers: dict[str, str | bytes] = {}
    if passphrase:  # UTF-8: any passphrase a header can hold
        encoded = _text(passphrase, "passphrase").encode("utf-8")
        check_header("passphrase", encoded, ascii_only=False)
        headers[PASSPHRASE_HEADER] = encoded
    params: dict[str, Any] = {"scopes": _strings(scopes, "scopes", joined=True)}
    if not _flag(vectors, "vectors"):
        params["vectors"] = "false"
    return Call("GET", "/api/export", params=params, idempotent=True, headers=headers)


def export_sink(output: Any) -> tuple[Any, Any] | None:
    """(write(line), close()) for `output`: a path to create, or an open text file; None collects records."""
    if output is None:
        return None
    if hasattr(output, "write"):
        return output.write, lambda: None
    handle = open(output, "w", encoding="utf-8")
    return handle.write, handle.close


def import_upload(path: Any, data: bytes | str | None) -> tuple[str, bytes]:
    """The file name and bytes to upload: a path to read, or a name with its `data`."""
    from pathlib import Path

    if data is None:
        file = Path(path)
        return file.name, file.read_bytes()
    return str(path), data.encode() if isinstance(data, str) else data


def import_form(scopes: list[str] | None, types: list[str] | None, passphrase: str | None) -> dict[str, str]:
    form = {"scopes": ",".join(_strings(scopes, "scopes", joined=True) or []),
            "types": ",".join(_strings(types, "types", joined=True) or [])}
    if passphrase:
        form["passphrase"] = passphrase
    return {k: v for k, v in form.items() if v}


def document_ingest(source: Any, data: bytes | str | None, *, scopes: list[str] | None, types: list[str] | None,
                    chunk_size: int | None, chunk_overlap: int | None) -> dict[str, Any]:
    """The keyword arguments of the POST /api/documents request: a JSON body for a URL, else a multipart upload
    (`source` is a path to read, or a name for `data`)."""
    fields = _drop_none({"scopes": _strings(scopes, "scopes", joined=True) or None,
                         "types": _strings(types, "types", joined=True) or None, "chunk_size": chunk_size,
                         "chunk_overlap": chunk_overlap})
    if data is None and isinstance(source, str) and source.lower().startswith(("http://", "https://")):
        return {"json": {**fields, "url": source}}
    name, content = import_upload(source, data)
    form = {k: ",".join(v) if isinstance(v, list) else str(v) for k, v in fields.items()}
    return {"files": {"file": (name, content)}, "data": form}


def document_list(status: str | None, limit: int, offset: int) -> Call:
    return Call("GET", "/api/documents", params={"status": status, "limit": limit, "offset": offset}, idempotent=True)


def document_get(document_id: str) -> Call:
    return Call("GET", f"/api/documents/{_segment(document_id, 'document_id')}", idempotent=True)


def _webhook_path(webhook_id: str, *rest: str) -> str:
    return "/".join(["/api/webhooks", _segment(webhook_id, "webhook_id"), *rest])


def webhook_subscribe(url: str, events: list[str], scopes: list[str] | None, description: str) -> Call:
    # Not idempotent: each call makes a subscription with its own secret.
    return Call("POST", "/api/webhooks", json=_drop_none({"url": url, "events": _strings(events, "events"),
                                                          "scopes": _strings(scopes, "scopes"),
                                                          "description": description}))


def webhook_list() -> Call:
    return Call("GET", "/api/webhooks", idempotent=True)


def webhook_get(webhook_id: str, reveal: bool) -> Call:
    return Call("GET", _webhook_path(webhook_id), params={"reveal": "true"} if reveal else None, idempotent=True)


def webhook_change(webhook_id: str, *, url: str | None, events: list[str] | None, scopes: list[str] | None,
                   description: str | None, active: bool | None) -> Call:
    body = _drop_none({"url": url, "events": _strings(events, "events"), "scopes": _strings(scopes, "scopes"),
                       "description": description, "active": active})
    return Call("PATCH", _webhook_path(webhook_id), json=body, idempotent=True)  # the same change twice is one


def webhook_delete(webhook_id: str) -> Call:
    return Call("DELETE", _webhook_path(webhook_id))


def webhook_resend(webhook_id: str, delivery_id: str) -> Call:
    return Call("POST", _webhook_path(webhook_id, "deliveries", _segment(delivery_id, "delivery_id"), "resend"))
