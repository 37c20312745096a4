"""The MCP server: the seed's agent tools over the Model Context Protocol (official `mcp` SDK).

Each tool runs a registered operation (agents.operations) by name, as the REST
view does, so the filter chain, validation, permissions, scopes, audit and
deployment filters are the same; errors come back as the API's
`{"error": {"code", "message", "fields", "status"}}` in a tool error.

The caller is the agent whose Bearer token came with the call: the HTTP
request's `Authorization` header (streamable HTTP under /mcp), or the token
`manage.py mcp` was started with (stdio).
"""
import json
import time
from typing import Any

import anyio
from asgiref.sync import sync_to_async
from django.db import close_old_connections, connections
from django.utils.translation import gettext as _
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, CallToolResult, ErrorData, JSONRPCError, TextContent
from pydantic import ValidationError
from rest_framework import serializers

from agents import operations
from agents.auth import active_token, is_bearer
from agents.caller import Caller
from core import request_context
from core.errors import api_exception_handler, invalid_fields
from core.logs import log_request

INSTRUCTIONS = (
    "KnowHub: search knowledge before acting (knowledge_search), save what you learn (knowledge_save), "
    "and report whether it helped (knowledge_update, knowledge_batch_update)."
)

stdio_token: str | None = None  # set by `manage.py mcp` for the stdio transport


def bearer_key(headers) -> str | None:
    value = (headers or {}).get("authorization", "")
    scheme, _, key = value.partition(" ")
    return key.strip() if is_bearer(scheme) and key.strip() else None


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str, fields: dict | None = None):
        super().__init__(message)
        self.error = {"code": code, "message": message, "fields": fields or {}, "status": status}


def _caller(raw_key: str | None) -> Caller:
    token = active_token(raw_key) if raw_key else None
    if token is None:
        raise _Refused(401, "not_authenticated", "invalid or revoked token" if raw_key else "no Bearer token")
    return Caller.for_token(token)


def _run_sync(raw_key: str | None, operation, request_id: str | None = None, *, own_thread: bool = False) -> Any:
    close_old_connections()  # what Django does around each HTTP request
    context = request_context.Context(request_id=request_context.request_id_from(request_id), entry="mcp")
    started, status = time.perf_counter(), 500
    try:
        with request_context.bound(context):  # counted as entry "mcp"; the jobs it queues carry the request id
            caller = _caller(raw_key)
            context.agent = caller.agent_id
            result = operation(caller)
            status = 200
            return result
    except _Refused as refused:
        status = refused.error["status"]
        raise
    except Exception as exc:  # noqa: BLE001 - mapped exactly as the REST API maps it, or re-raised
        response = api_exception_handler(exc, {})
        if response is None:
            raise
        error = response.data["error"]
        refused = _Refused(response.status_code, error["code"], error["message"], error.get("fields"))
        if response.has_header("Retry-After"):  # e.g. 503 while the database is down
            refused.error["retry_after"] = int(response["Retry-After"])
        status = refused.error["status"]
        raise refused from exc
    finally:
        with request_context.bound(context):  # the tool call's one line, under its request id
            log_request(context, method="MCP", route="/mcp", url_name="mcp", status=status,
                        seconds=time.perf_counter() - started)
        if own_thread:  # a thread of the executor, which may not run again for a while: its connection goes back now
            connections.close_all()
        else:
            close_old_connections()


def _tool_error(error: dict) -> CallToolResult:
    """A tool error whose text is the API's error JSON."""
    text = json.dumps({"error": error}, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _invalid(detail: dict) -> CallToolResult:
    """The API's 400 for `detail` ({argument: [problems]}), its message starting with the first argument at fault."""
    message, fields = invalid_fields(detail)
    return _tool_error({"code": "invalid", "message": message, "fields": fields, "status": 400})


def _as_arguments(error: dict, named: dict[str, str]) -> dict:
    """`error` with the fields its operation named (`q`, `source.urls.0`) named as the tool's arguments are
    (`query`, `urls.0`), in `fields` and at the start of `message`."""
    def rename(path: str) -> str:
        for field, argument in named.items():
            if path == field or path.startswith(field + "."):
                return argument + path[len(field):]
        return path

    first, said, rest = error["message"].partition(": ")
    return {**error, "fields": {rename(key): value for key, value in (error.get("fields") or {}).items()},
            "message": rename(first) + said + rest if said else error["message"]}


async def _call(ctx: Context, operation, *, named: dict[str, str] | None = None) -> Any:
    """The operation's JSON result, or a tool error whose text is the API's error JSON (the fields `named` maps named
    as the tool's arguments)."""
    raw_key = bearer_key(ctx.headers) if ctx.headers is not None else stdio_token
    request_id = (ctx.headers or {}).get("x-request-id")
    try:
        if ctx.headers is None:  # stdio: one agent's process, its calls one after another on Django's shared thread
            return await sync_to_async(_run_sync, thread_sensitive=True)(raw_key, operation, request_id)
        # HTTP: a thread of the event loop's executor, not the one thread every thread-sensitive call shares, so one
        # agent's long call (an import, an export) does not hold up the others' (how many run at once: asgi.py's bound)
        return await sync_to_async(_run_sync, thread_sensitive=False)(raw_key, operation, request_id, own_thread=True)
    except _Refused as refused:
        return _tool_error(_as_arguments(refused.error, named) if named else refused.error)


def _given(**values) -> dict:
    return {k: v for k, v in values.items() if v is not None}


def _op(name: str, data: dict | None = None, **args):
    """The registered operation `name` for a caller, its reply rendered as REST renders it."""
    return lambda caller: operations.run(name, caller, data=data, **args)


# What a JSON value of each scalar type is; the SDK's pydantic models are lax and took `"top_k": true` as 1, `"5"` as
# 5 and `"reveal": "yes"` as true, which the REST API refuses (core.fields: nothing is coerced).
_SCALARS = {
    "integer": (lambda value: isinstance(value, int) and not isinstance(value, bool),
                serializers.IntegerField.default_error_messages["invalid"]),
    "number": (lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
               serializers.FloatField.default_error_messages["invalid"]),
    "boolean": (lambda value: isinstance(value, bool), serializers.BooleanField.default_error_messages["invalid"]),
}


def _an_id(key: str, value) -> bool:
    """A number naming a thing (`conflict_id`, a `version`), which REST takes from its path as text: its digits as a
    string are it too, as the Python client sends them; never a boolean."""
    return (key.endswith("_id") or key == "version") and isinstance(value, str) and value.isascii() and value.isdigit()


def _coercions(properties: dict, arguments: dict) -> dict[str, list[str]]:
    """The arguments a tool takes as a scalar JSON type (or null) that are of another type, with why: refused
    before the SDK would coerce them."""
    found = {}
    for key, value in arguments.items():
        schema = properties.get(key) or {}
        types = {option.get("type") for option in schema.get("anyOf", [schema])}
        if (value is None and "null" in types) or ("integer" in types and _an_id(key, value)):
            continue
        scalar = [_SCALARS[t] for t in types if t in _SCALARS]
        if scalar and len(types - {"null"}) == 1 and not scalar[0][0](value):
            found[key] = [str(scalar[0][1])]
    return found


class KnowHubMCPServer(MCPServer):
    """The SDK's server, its tools refusing arguments as the REST API refuses fields: one a tool does not take (the
    SDK dropped it, so `topk` or `querry` ran with the defaults) and one of the wrong type (the SDK's own text, a
    pydantic dump) are the API's 400 naming the argument, in the tool error's API JSON."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        taken = tool.parameters.get("properties", {}) if tool is not None else {}
        unknown = [key for key in arguments if tool is not None and key not in taken]
        if unknown:
            expected = _("unknown field; expected one of %(expected)s") % {"expected": ", ".join(taken)}
            return _invalid({key: [expected] for key in unknown})
        if coerced := _coercions(taken, arguments):
            return _invalid(coerced)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            detail: dict[str, list[str]] = {}
            for problem in exc.__cause__.errors(include_url=False):
                where = ".".join(str(part) for part in problem["loc"]) or "non_field_errors"
                detail.setdefault(where, []).append(problem["msg"])
            return _invalid(detail)


    async def run_stdio_async(self) -> None:
        """The SDK's stdio transport, every line answered: one that is no JSON-RPC message (not JSON, `{}`, a batch)
        gets the error streamable HTTP answers, -32700 or -32600 with id null, where the SDK dropped it and a
        client waiting for a reply waited for good."""
        async with stdio_server() as (read_stream, write_stream):
            await self._lowlevel_server.run(AnsweringStream(read_stream, write_stream), write_stream,
                                            self._lowlevel_server.create_initialization_options())


def rejection(problem: Exception) -> JSONRPCError:
    """The reply to a line that is no JSON-RPC message (`problem`, what reading it raised). Its id is null: a line
    that cannot be read has no id to answer (JSON-RPC 2.0, section 5)."""
    errors = problem.errors(include_url=False) if isinstance(problem, ValidationError) else []
    unreadable = [error["msg"] for error in errors if error["type"] == "json_invalid"]
    if unreadable or not errors:
        error = ErrorData(code=PARSE_ERROR, message=f"Parse error: {(unreadable or [str(problem)])[0]}"[:300])
    else:
        error = ErrorData(code=INVALID_REQUEST, message="Invalid request: a line is one JSON-RPC request, notification "
                                                        "or response object")
    return JSONRPCError(jsonrpc="2.0", id=None, error=error)


class AnsweringStream:
    """The stdio transport's incoming messages, as the SDK's server reads them (`async for`, `last_context`), with
    what it could not read answered on `write_stream` instead of handed on (the SDK logged it, answering nothing)."""

    def __init__(self, inner, write_stream):
        self._inner = inner
        self._write_stream = write_stream

    @property
    def last_context(self):
        return getattr(self._inner, "last_context", None)

    async def receive(self):
        while isinstance(item := await self._inner.receive(), Exception):
            await self._write_stream.send(SessionMessage(rejection(item)))
        return item

    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()


server = KnowHubMCPServer(name="knowhub", instructions=INSTRUCTIONS)


@server.tool()
async def knowledge_search(ctx: Context, query: str, top_k: int = 5, min_score: int = 3, types: list[str] | None = None,
                           filters: dict[str, Any] | list[Any] | None = None, rank: str | None = None,
                           scopes: list[str] | None = None, answer_floor: float | None = None,
                           relevance_floor: float | None = None, relevance_ratio: float | None = None,
                           include_superseded: bool = False) -> dict[str, Any]:
    """Search knowledge (two stages: hybrid retrieval, then a relevance gate and the quality rerank). Each result
    carries its `relevance` (0-1); an empty list means nothing here answers the query. `filters` is a filter
    expression, e.g. {"op": "EQ", "key": "tags.domain", "value": "coding_style"}; `rank` is quality (default),
    relevance or seed. The relevance gate's thresholds (answer_floor, relevance_floor, relevance_ratio) default to the
    server's. The reply's `search_id` goes with your feedback on its results (knowledge_update,
    knowledge_batch_update). A result with `conflicts` disagrees with (or refines) another item you can read: read
    both before acting. Superseded items are left out unless include_superseded."""
    data = _given(q=query, top_k=top_k, min_score=min_score, types=types, filters=filters, rank=rank, scopes=scopes,
                  answer_floor=answer_floor, relevance_floor=relevance_floor, relevance_ratio=relevance_ratio,
                  include_superseded=include_superseded or None)
    return await _call(ctx, _op("knowledge_search", data), named={"q": "query"})


# knowledge_save's arguments that the API's body nests (`source`, `eval`): its refusals name them as arguments
SAVE_ARGUMENTS = {"source.name": "source_name", "source.category": "source_category", "source.urls": "urls",
                  "source.agent_id": "agent_id", "source.submitted_by": "submitted_by", "eval.confidence": "confidence"}


@server.tool()
async def knowledge_save(ctx: Context, task: str, content: str, types: list[str], tags: dict[str, str] | None = None,
                         scopes: list[str] | None = None, owner: str | None = None, source_name: str = "",
                         source_category: str = "exp", urls: list[str] | None = None, agent_id: str | None = None,
                         submitted_by: str = "", score: int = 3, message_id: str = "",
                         resource_ids: list[str] | None = None, secure_resource_id: str = "",
                         confidence: float | None = None) -> dict[str, Any]:
    """Save a new piece of knowledge; scopes, owner and agent_id default to the token's. `confidence` (0-1) is
    the seed's eval.confidence; `secure_resource_id` names a credential or cookie resource it relies on."""
    source = _given(name=source_name, category=source_category, urls=urls or [], agent_id=agent_id,
                    submitted_by=submitted_by, message_id=message_id)
    data = _given(task=task, content=content, types=types, tags=tags, scopes=scopes, owner=owner, source=source,
                  score=score, message_id=message_id, resource_ids=resource_ids,
                  secure_resource_id=secure_resource_id or None,
                  eval=None if confidence is None else {"confidence": confidence})
    return await _call(ctx, _op("knowledge_save", data), named=SAVE_ARGUMENTS)


@server.tool()
async def knowledge_get(ctx: Context, knowledge_id: str) -> dict[str, Any]:
    """One knowledge item in the seed's shape."""
    return await _call(ctx, _op("knowledge_get", knowledge_id=knowledge_id))


@server.tool()
async def knowledge_edit(ctx: Context, knowledge_id: str, task: str | None = None, content: str | None = None,
                         tags: dict[str, str] | None = None, types: list[str] | None = None,
                         reason: str = "", base_updated_at: str | None = None) -> dict[str, Any]:
    """Edit an item's task, content, tags or types (its owner, or a curator); the old text is kept as a
    version and the item is re-embedded. Give at least one field to change, and a reason. `base_updated_at`: the
    item's `updated_at` as you read it; the edit is then refused (409) if the item changed since, instead of
    overwriting that change."""
    data = _given(task=task, content=content, tags=tags, types=types, reason=reason, base_updated_at=base_updated_at)
    return await _call(ctx, _op("knowledge_edit", data, knowledge_id=knowledge_id))


@server.tool()
async def knowledge_filters(ctx: Context) -> dict[str, Any]:
    """The filter keys and operators valid for this token, with sample values: what `filters` of
    knowledge_search can name."""
    return await _call(ctx, _op("knowledge_filters"))


@server.tool()
async def knowledge_update(ctx: Context, knowledge_id: str, add_helpful_case: dict[str, Any] | None = None,
                           add_harmful_case: dict[str, Any] | None = None, update_score: int | None = None,
                           evolve_feedback: str | None = None, search_id: str | None = None) -> dict[str, Any]:
    """Feedback on an item: a helpful or harmful case, a new score, or evolve_feedback (an LLM rewrite job).
    Pass the `search_id` of the knowledge_search that returned the item with a case. The reply shows the item with
    the newest 20 cases of each history (knowledge_get has them all)."""
    data = _given(add_helpful_case=add_helpful_case, add_harmful_case=add_harmful_case, update_score=update_score,
                  evolve_feedback=evolve_feedback, search_id=search_id)
    return await _call(ctx, _op("knowledge_update", data, knowledge_id=knowledge_id))


@server.tool()
async def knowledge_batch_update(ctx: Context, feedback_list: list[dict[str, Any]]) -> dict[str, Any]:
    """Many helpful/harmful reports: [{"knowledge_id", "is_helpful", "case", "search_id"}]; per-entry results
    (`search_id`: the knowledge_search that returned the item)."""
    return await _call(ctx, _op("knowledge_batch_update", {"feedback_list": feedback_list}))


@server.tool()
async def knowledge_bulk_save(ctx: Context, items: list[dict[str, Any]]) -> dict[str, Any]:
    """Save up to 500 new items at once, each shaped as knowledge_save's REST body ({"task", "content", "types",
    "tags", "scopes", "source": {...}, ...}); per-item results in order: good items land even when some fail."""
    return await _call(ctx, _op("knowledge_bulk_save", {"items": items}))


MCP_EXPORT_MAX_CHARS = 20_000_000


def _export_text(data: dict):
    """The export as one JSON Lines text (a tool answers at once; GET /api/export streams a big one)."""
    from api.transfer import jsonl

    def run(caller):
        text, size = [], 0
        for line in jsonl(operations.call("knowledge_export", caller, data=data)):
            size += len(line)
            if size > MCP_EXPORT_MAX_CHARS:
                raise _Refused(413, "too_large", f"the export is larger than {MCP_EXPORT_MAX_CHARS:,} characters: "
                                                 "narrow it with `scopes`, or stream it from GET /api/export")
            text.append(line)
        return {"jsonl": "".join(text), "records": len(text)}

    return run


@server.tool()
async def knowledge_export(ctx: Context, scopes: list[str] | None = None, passphrase: str | None = None,
                           vectors: bool | None = None) -> dict[str, Any]:
    """Everything this token may read as JSON Lines (`jsonl`): a header, resources with their versions (secrets
    encrypted; `passphrase` seals them for another installation), knowledge items with versions, feedback, merge
    links and vectors (`vectors: false` leaves them out: about an eighth the size, the importing hub embeds again).
    For a large hub use GET /api/export, which streams."""
    return await _call(ctx, _export_text(_given(scopes=scopes, passphrase=passphrase, vectors=vectors)))


@server.tool()
async def knowledge_import(ctx: Context, filename: str, content: str, scopes: list[str] | None = None,
                           types: list[str] | None = None, passphrase: str | None = None) -> dict[str, Any]:
    """Import a file's text (curator tokens): our export (`filename` ending .jsonl), a CSV (.csv, one item per row)
    or Markdown (.md, chunked by headings). `scopes` for records that name none. Runs as a job: returns
    `{"job": {"id", "status", "url"}}` at once; poll job_get with the id until it is succeeded (its `result` is the
    report: imported, updated, skipped (unchanged), failed (line and reason)) or failed (`error`: why the file was
    refused). Importing the same file again changes nothing."""
    data = _given(filename=filename, content=content, scopes=scopes, types=types, passphrase=passphrase)
    return await _call(ctx, _op("knowledge_import", data))


@server.tool()
async def knowledge_list(ctx: Context, limit: int = 10, types: list[str] | None = None,
                         scopes: list[str] | None = None, cursor: str | None = None) -> dict[str, Any]:
    """Knowledge newest first; pass the reply's `next` as `cursor` for the following page."""
    data = _given(limit=limit, types=types, scopes=scopes, cursor=cursor)
    return await _call(ctx, _op("knowledge_list", data))


@server.tool()
async def knowledge_slim(ctx: Context, model: str = "", dry_run: bool = False) -> dict[str, Any]:
    """Queue a merge of near-duplicates (a job; see job_get)."""
    return await _call(ctx, _op("knowledge_slim", {"model": model, "dry_run": dry_run}))


@server.tool()
async def resource_save(ctx: Context, id: str, title: str, body: str = "", secure_body: str = "",
                        content_type: str = "text", metadata: dict[str, Any] | None = None,
                        scopes: list[str] | None = None, expires_at: str | None = None) -> dict[str, Any]:
    """Store a resource (code, credential, cookie); secure_body is encrypted at rest and never echoed."""
    data = _given(id=id, title=title, body=body, secure_body=secure_body, content_type=content_type,
                  metadata=metadata or {}, scopes=scopes, expires_at=expires_at)
    return await _call(ctx, _op("resource_save", data))


@server.tool()
async def resource_get(ctx: Context, id: str, reveal: bool = False) -> dict[str, Any]:
    """A resource by id; reveal=true adds its secret for tokens allowed to see secrets (audited)."""
    request = ctx.request_context.request  # the HTTP request (streamable HTTP), None on stdio
    client = getattr(request, "client", None)
    user_agent = (ctx.headers or {}).get("user-agent", "") if ctx.headers is not None else ""
    return await _call(ctx, _op("resource_get", {"reveal": reveal}, resource_id=id,
                                remote_addr=getattr(client, "host", None), user_agent=f"mcp {user_agent}".strip()))


@server.tool()
async def job_get(ctx: Context, job_id: str) -> dict[str, Any]:
    """A job's status (queued, running, succeeded, failed), result or error."""
    return await _call(ctx, _op("job_get", job_id=job_id))


@server.tool()
async def document_ingest(ctx: Context, url: str | None = None, filename: str | None = None, content: str | None = None,
                          content_base64: str | None = None, scopes: list[str] | None = None,
                          types: list[str] | None = None, chunk_size: int | None = None,
                          chunk_overlap: int | None = None) -> dict[str, Any]:
    """Read a document into knowledge items, by a job: a `url` (http/https), or a file's `filename` with its text
    (`content`: Markdown, text, HTML) or bytes (`content_base64`: also PDF, DOCX). Chunks follow headings and
    paragraphs (`chunk_size`, `chunk_overlap` in characters); each item's task is its section's heading. Returns
    the document (status queued); poll document_get or job_get. The same file again does nothing."""
    data = _given(url=url, filename=filename, content=content, content_base64=content_base64, scopes=scopes,
                  types=types, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return await _call(ctx, _op("document_ingest", data))


@server.tool()
async def document_list(ctx: Context, status: str | None = None, limit: int = 20, offset: int = 0) -> dict[str, Any]:
    """Documents you may read, newest first, with status (queued, processing, done, failed) and progress."""
    return await _call(ctx, _op("document_list", _given(status=status, limit=limit, offset=offset)))


@server.tool()
async def document_get(ctx: Context, document_id: str) -> dict[str, Any]:
    """One document: status, progress, error, and the ids of the knowledge items it became."""
    return await _call(ctx, _op("document_get", document_id=document_id))


# Curators' operations (knowledge.operations.curators): the curator role's work, for curator tokens.

@server.tool()
async def knowledge_versions(ctx: Context, knowledge_id: str) -> dict[str, Any]:
    """An item's earlier texts, newest first (number, task, content, tags, changed_by, reason)."""
    return await _call(ctx, _op("knowledge_versions", knowledge_id=knowledge_id))


@server.tool()
async def knowledge_restore_version(ctx: Context, knowledge_id: str, version: int) -> dict[str, Any]:
    """Put an earlier version's text back (the owner, or a curator token); the replaced text becomes a version."""
    return await _call(ctx, _op("knowledge_restore_version", {"version": version}, knowledge_id=knowledge_id))


@server.tool()
async def knowledge_archive(ctx: Context, knowledge_id: str, reason: str = "") -> dict[str, Any]:
    """Archive an item (the owner, or a curator token): search skips it; knowledge_activate brings it back."""
    return await _call(ctx, _op("knowledge_archive", {"reason": reason}, knowledge_id=knowledge_id))


@server.tool()
async def knowledge_activate(ctx: Context, knowledge_id: str, reason: str = "") -> dict[str, Any]:
    """Make an archived item active again."""
    return await _call(ctx, _op("knowledge_activate", {"reason": reason}, knowledge_id=knowledge_id))


@server.tool()
async def knowledge_unmerge(ctx: Context, knowledge_id: str) -> dict[str, Any]:
    """Undo a merge (curator tokens): the originals become active again, the merged item archived."""
    return await _call(ctx, _op("knowledge_unmerge", knowledge_id=knowledge_id))


@server.tool()
async def merge_proposals(ctx: Context, status: str = "pending") -> dict[str, Any]:
    """Stored merge proposals (curator tokens): pending ones await review; approved, edited or rejected ones are decided."""
    return await _call(ctx, _op("merge_proposals", {"status": status}))


@server.tool()
async def merge_approve(ctx: Context, ids: list[str], task: str | None = None,
                        content: str | None = None) -> dict[str, Any]:
    """Merge a proposed group into one item (curator tokens): with the proposal's text, or your own."""
    return await _call(ctx, _op("merge_approve", _given(ids=ids, task=task, content=content)))


@server.tool()
async def merge_reject(ctx: Context, ids: list[str]) -> dict[str, Any]:
    """Reject a proposed group (curator tokens): none of its pairs is proposed again."""
    return await _call(ctx, _op("merge_reject", {"ids": ids}))


@server.tool()
async def evolve_rollback(ctx: Context, job_id: str) -> dict[str, Any]:
    """Put back the text an evolve job replaced (curator tokens)."""
    return await _call(ctx, _op("evolve_rollback", job_id=job_id))


@server.tool()
async def evolve_accept(ctx: Context, job_id: str) -> dict[str, Any]:
    """Put an evolve job's rewrite live when evolve is under review (curator tokens); the old text stays a version."""
    return await _call(ctx, _op("evolve_accept", job_id=job_id))


@server.tool()
async def evolve_reject(ctx: Context, job_id: str) -> dict[str, Any]:
    """Turn down an evolve job's rewrite awaiting review (curator tokens): the item stays as it is."""
    return await _call(ctx, _op("evolve_reject", job_id=job_id))


@server.tool()
async def conflict_list(ctx: Context, status: str = "open", kind: str | None = None, knowledge_id: str | None = None,
                        limit: int = 50, offset: int = 0) -> dict[str, Any]:
    """Conflicts between close items (curator tokens): contradictions, refinements, duplicates, or close pairs no
    LLM judged; open ones by default (status: open, kept_both, superseded, merged, dismissed or all)."""
    return await _call(ctx, _op("conflict_list", _given(status=status, kind=kind, knowledge_id=knowledge_id,
                                                         limit=limit, offset=offset)))


@server.tool()
async def conflict_get(ctx: Context, conflict_id: int) -> dict[str, Any]:
    """One conflict with both items, the judgment and what was done (curator tokens)."""
    return await _call(ctx, _op("conflict_get", conflict_id=conflict_id))


@server.tool()
async def conflict_resolve(ctx: Context, conflict_id: int, action: str, successor_id: str | None = None,
                           task: str | None = None, content: str | None = None) -> dict[str, Any]:
    """Settle a conflict (curator tokens): keep_both, supersede (successor_id wins; default the newer item),
    merge (task/content or the pending proposal's text) or dismiss (never raised again). conflict_reopen undoes it."""
    return await _call(ctx, _op("conflict_resolve", _given(action=action, successor_id=successor_id, task=task,
                                                            content=content), conflict_id=conflict_id))


@server.tool()
async def conflict_reopen(ctx: Context, conflict_id: int) -> dict[str, Any]:
    """Undo a conflict's resolution (curator tokens): a superseded item is active again, a merge undone."""
    return await _call(ctx, _op("conflict_reopen", conflict_id=conflict_id))


@server.tool()
async def knowledge_supersede(ctx: Context, knowledge_id: str, successor_id: str) -> dict[str, Any]:
    """Mark an item superseded by a better one (its owner or a curator token): search skips it, nothing is
    deleted; knowledge_activate brings it back."""
    return await _call(ctx, _op("knowledge_supersede", {"successor_id": successor_id}, knowledge_id=knowledge_id))
# Webhooks (webhooks.operations): curators subscribe URLs to events; curator tokens only.

@server.tool()
async def webhook_subscribe(ctx: Context, url: str, events: list[str], scopes: list[str] | None = None,
                            description: str = "") -> dict[str, Any]:
    """Subscribe a URL to events (knowledge.created, knowledge.updated, knowledge.merged, knowledge.superseded,
    knowledge.archived, conflict.raised, feedback.received, job.finished, resource.expiring) in scopes this token
    reads (default: all of them). The reply holds the signing secret (whsec_...); deliveries are signed as in
    Standard Webhooks."""
    return await _call(ctx, _op("webhook_subscribe", _given(url=url, events=events, scopes=scopes,
                                                            description=description)))


@server.tool()
async def webhook_list(ctx: Context) -> dict[str, Any]:
    """This token's webhook subscriptions with their state (active, or paused and why)."""
    return await _call(ctx, _op("webhook_list"))


@server.tool()
async def webhook_get(ctx: Context, webhook_id: str, reveal: bool = False) -> dict[str, Any]:
    """One subscription with its recent deliveries (status, response code, attempts); reveal=true adds its secret."""
    return await _call(ctx, _op("webhook_get", {"reveal": reveal}, webhook_id=webhook_id))


@server.tool()
async def webhook_change(ctx: Context, webhook_id: str, url: str | None = None, events: list[str] | None = None,
                         scopes: list[str] | None = None, description: str | None = None,
                         active: bool | None = None) -> dict[str, Any]:
    """Change a subscription; active=false pauses it, active=true resumes a paused one."""
    data = _given(url=url, events=events, scopes=scopes, description=description, active=active)
    return await _call(ctx, _op("webhook_change", data, webhook_id=webhook_id))


@server.tool()
async def webhook_delete(ctx: Context, webhook_id: str) -> dict[str, Any]:
    """Delete a subscription and its delivery log."""
    return await _call(ctx, _op("webhook_delete", webhook_id=webhook_id))


@server.tool()
async def webhook_resend(ctx: Context, webhook_id: str, delivery_id: str) -> dict[str, Any]:
    """Send a finished delivery again (same event id and body, a new attempt)."""
    return await _call(ctx, _op("webhook_resend", webhook_id=webhook_id, delivery_id=delivery_id))
