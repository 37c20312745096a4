"""OpenAI function-calling schemas for the seed's tools, and a dispatcher that runs a model's tool call.

>>> from openai import OpenAI
>>> from knowhub_client import KnowHub, tools
>>> hub = KnowHub("http://localhost:8000", token="kh_...")
>>> schemas, dispatch = tools(hub)
>>> reply = OpenAI().chat.completions.create(model="gpt-4o", messages=messages, tools=schemas)
>>> for call in reply.choices[0].message.tool_calls or []:
...     messages.append({"role": "tool", "tool_call_id": call.id, "content": dispatch(call)})

With an `AsyncKnowHub`, ``schemas, dispatch = async_tools(hub)`` and ``await dispatch(call)``.
For the Responses API use ``tools(hub, api="responses")`` and answer each ``function_call``
item with ``{"type": "function_call_output", "call_id": item.call_id, "output": dispatch(item)}``.
"""
from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from knowhub_client.agent_text import agentic_filters_dict
from knowhub_client.errors import KnowHubError

TYPES = ["user_profile", "strategy", "tool", "usecase", "definition", "plan"]
_TYPES = {"type": "array", "items": {"type": "string", "enum": TYPES}}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_CASE = {"type": "object", "description": "task, outcome, reason, timestamp", "additionalProperties": True}
_SEARCH_ID = {"type": "string", "description": "the search_id of the knowledge_search that returned the item"}


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required,
                           "additionalProperties": False}}


TOOL_DEFINITIONS: list[dict[str, Any]] = [
    _tool("knowledge_search", "Search the knowledge base before acting. Returns the best items by relevance and "
          "quality (score + helpful - 2*harmful), and a search_id to send with feedback on them.", {
              "query": {"type": "string", "description": "what you need to know"},
              "top_k": {"type": "integer", "minimum": 1, "maximum": 100, "default": 5},
              "min_score": {"type": "integer", "minimum": 1, "maximum": 5, "default": 3},
              "types": {**_TYPES, "description": "only items of these types"},
              "filters": {"type": "array", "description": "metadata filters (keys in the instructions), each "
                          '{"key": ..., "value": ...}; all must match', "items": {
                              "type": "object", "required": ["key", "value"], "additionalProperties": False,
                              "properties": {"key": {"type": "string"}, "value": {"type": "string"}}}},
          }, ["query"]),
    _tool("knowledge_save", "Save a new piece of knowledge learned while working.", {
        "task": {"type": "string", "description": "in what situation, to reach what goal"},
        "content": {"type": "string", "description": "the knowledge itself"},
        "types": {**_TYPES, "minItems": 1},
        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
        "scopes": {**_STRINGS, "description": "who may see it, e.g. org:acme (default: the token's)"},
        "owner": {"type": "string"},
        "source_name": {"type": "string"},
        "source_category": {"type": "string", "default": "exp"},
        "urls": _STRINGS,
        "agent_id": {"type": "string"},
        "submitted_by": {"type": "string"},
        "score": {"type": "integer", "minimum": 1, "maximum": 5, "default": 3},
        "message_id": {"type": "string"},
        "resource_ids": {**_STRINGS, "description": "ids of resources this knowledge uses"},
    }, ["task", "content", "types"]),
    _tool("knowledge_update", "Report whether an item helped or harmed, change its score, or ask for a rewrite.", {
        "knowledge_id": {"type": "string"},
        "add_helpful_case": _CASE,
        "add_harmful_case": _CASE,
        "update_score": {"type": "integer", "minimum": 1, "maximum": 5},
        "evolve_feedback": {"type": "string", "description": "how to improve the content (an LLM rewrites it)"},
        "search_id": _SEARCH_ID,
    }, ["knowledge_id"]),
    _tool("knowledge_get", "Fetch one knowledge item by id, with its feedback history.", {
        "knowledge_id": {"type": "string"},
    }, ["knowledge_id"]),
    _tool("knowledge_edit", "Correct an item you saved: its task, content, tags or types (the old text is kept "
          "as a version). Give at least one of them, and why.", {
        "knowledge_id": {"type": "string"},
        "task": {"type": "string"},
        "content": {"type": "string"},
        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
        "types": {**_TYPES, "minItems": 1},
        "reason": {"type": "string", "description": "why the item changes"},
    }, ["knowledge_id"]),
    _tool("knowledge_batch_update", "Report for many items at once whether they helped.", {
        "feedback_list": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["knowledge_id", "is_helpful"],
            "properties": {"knowledge_id": {"type": "string"}, "is_helpful": {"type": "boolean"}, "case": _CASE,
                           "search_id": _SEARCH_ID},
        }},
    }, ["feedback_list"]),
    _tool("knowledge_list", "List saved knowledge, newest first.", {
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
        "types": _TYPES,
        "scopes": _STRINGS,
    }, []),
    _tool("knowledge_slim", "Merge near-duplicate knowledge (runs as a background job).", {
        "model": {"type": "string", "description": "LLM to merge with (default: the server's)"},
    }, []),
    _tool("resource_save", "Store a raw resource (code, credential, cookie) that knowledge can refer to by id.", {
        "id": {"type": "string", "description": "path-like, e.g. code/selenium/login"},
        "title": {"type": "string"},
        "body": {"type": "string"},
        "secure_body": {"type": "string", "description": "secret part, encrypted at rest"},
        "content_type": {"type": "string", "enum": ["text", "code", "credential", "cookie"], "default": "text"},
        "metadata": {"type": "object"},
        "scopes": _STRINGS,
        "expires_at": {"type": "string", "description": "ISO 8601"},
    }, ["id", "title"]),
    _tool("resource_get", "Fetch a resource by id; reveal=true includes its secret (if the token may).", {
        "id": {"type": "string"},
        "reveal": {"type": "boolean", "default": False},
    }, ["id"]),
]

TOOL_NAMES = tuple(t["name"] for t in TOOL_DEFINITIONS)
_ARGUMENTS = {t["name"]: frozenset(t["parameters"]["properties"]) for t in TOOL_DEFINITIONS}


def openai_schemas(api: str = "chat") -> list[dict[str, Any]]:
    """The definitions shaped for chat completions (``api="chat"``) or the Responses API (``"responses"``)."""
    if api == "chat":
        return [{"type": "function", "function": t} for t in TOOL_DEFINITIONS]
    if api == "responses":
        return [{"type": "function", **t} for t in TOOL_DEFINITIONS]
    raise ValueError(f"api must be 'chat' or 'responses', not {api!r}")


def call_name_and_arguments(tool_call: Any) -> tuple[str, str | dict[str, Any]]:
    """Name and arguments of a chat tool call, a Responses ``function_call`` item, or their dict forms."""
    function = tool_call.get("function") if isinstance(tool_call, dict) else getattr(tool_call, "function", None)
    source = function if function is not None else tool_call
    get = source.get if isinstance(source, dict) else lambda key, default=None: getattr(source, key, default)
    return str(get("name")), get("arguments") or "{}"


def tools(hub: Any, *, api: str = "chat") -> tuple[list[dict[str, Any]], Callable[[Any], str]]:
    """The OpenAI tool schemas and ``dispatch(tool_call) -> str`` (the JSON result to send back).

    ``hub`` is a sync `KnowHub`. Errors become ``{"error": {"code", "message", "fields"}}`` so the
    model can read and correct them; an unknown tool, an argument its schema does not list, or malformed
    arguments too. ``hub.build_context(True, tool_name="knowledge_search")`` tells the model the filter keys.
    """

    def dispatch(tool_call: Any) -> str:
        method, arguments, refusal = _resolve(hub, tool_call)
        if refusal is not None:
            return refusal
        try:
            return _result(method(**arguments))
        except (TypeError, ValueError, RecursionError, KnowHubError) as exc:
            return _failure(exc)

    return openai_schemas(api), dispatch


def async_tools(hub: Any, *, api: str = "chat") -> tuple[list[dict[str, Any]], Callable[[Any], Awaitable[str]]]:
    """`tools` for an `AsyncKnowHub`: ``await dispatch(tool_call)``."""

    async def dispatch(tool_call: Any) -> str:
        method, arguments, refusal = _resolve(hub, tool_call)
        if refusal is not None:
            return refusal
        try:
            return _result(await method(**arguments))
        except (TypeError, ValueError, RecursionError, KnowHubError) as exc:
            return _failure(exc)

    return openai_schemas(api), dispatch


def _resolve(hub: Any, tool_call: Any) -> tuple[Any, dict[str, Any], str | None]:
    """The hub's method and the arguments for a tool call, or the error text to answer instead."""
    name, raw = call_name_and_arguments(tool_call)
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else dict(raw)
    except (TypeError, ValueError) as exc:
        return None, {}, _error("invalid_arguments", f"arguments are not a JSON object: {exc}")
    except RecursionError:
        return None, {}, _error("invalid_arguments", "arguments are nested too deeply")
    if name not in TOOL_NAMES:
        return None, {}, _error("unknown_tool", f"no tool named {name!r}; tools: {', '.join(TOOL_NAMES)}")
    if not isinstance(arguments, dict):
        return None, {}, _error("invalid_arguments", "arguments must be a JSON object")
    unknown = sorted(str(key) for key in arguments if key not in _ARGUMENTS[name])
    if unknown:  # the client's methods take more (idempotency_key, ...) than the model is offered
        return None, {}, _error("invalid_arguments", f"{name} takes no argument {', '.join(map(repr, unknown))}; "
                                f"it takes {', '.join(sorted(_ARGUMENTS[name]))}")
    if name == "knowledge_search" and isinstance(arguments.get("filters"), list):
        arguments["filters"] = agentic_filters_dict(arguments["filters"]) or None  # the server's {key: value} form
    return getattr(hub, name), arguments, None


def _result(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _failure(exc: Exception) -> str:
    if isinstance(exc, KnowHubError):
        return json.dumps({"error": {"code": exc.code, "message": exc.message, "fields": exc.fields,
                                     "status": exc.status}}, ensure_ascii=False)
    if isinstance(exc, RecursionError):
        return _error("invalid_arguments", "arguments are nested too deeply")
    return _error("invalid_arguments", str(exc))  # a TypeError: a missing argument; a ValueError: a bad one


def _error(code: str, message: str) -> str:
    return json.dumps({"error": {"code": code, "message": message, "fields": {}}}, ensure_ascii=False)
