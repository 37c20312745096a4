"""Agno integration: a `knowledge_retriever`, and `search_knowledge_base` with Agno's filter semantics.

Agno (seed 002) calls ``Agent(knowledge_retriever=fn)`` with ``query``, ``num_documents`` and,
when the signature asks for it, ``filters`` (the agent's static ``knowledge_filters``, or what the
model chose with ``enable_agentic_knowledge_filters=True``):

>>> from agno.agent import Agent
>>> from agno.filters import EQ
>>> hub = KnowHub("http://localhost:8000", token="kh_...")
>>> agent = Agent(model=..., knowledge_retriever=knowhub_retriever(hub),
...               knowledge_filters=[EQ("tags.domain", "coding_style")], search_knowledge=True)

Without Agno, `search_knowledge_base` gives the same tool to any framework (seed 000):

>>> search = search_knowledge_base(hub, knowledge_filters=EQ("types", "tool"))
>>> search("selenium login")                       # static filters, always applied
>>> search = search_knowledge_base(hub, enable_agentic_filters=True)
>>> search("selenium login", filters=[{"key": "tags.domain", "value": "web"}])

With an `AsyncKnowHub` both are coroutine functions (Agno awaits them in ``agent.arun``).
"""
from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

from knowhub_client.agent_text import as_documents, resolve_filters
from knowhub_client.errors import KnowHubError
from knowhub_client.filters import filter_json

DEFAULT_NUM_DOCUMENTS = 5
_FAILURES = (KnowHubError, TypeError, ValueError, RecursionError)  # what a search can raise for a model's input


def _is_async(hub: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(hub, "knowledge_search", None))


def _results(found: Any) -> list[dict[str, Any]]:
    results = found.get("results") if isinstance(found, dict) else None
    if not isinstance(results, list):
        raise KnowHubError("expected search results, got a reply without them", code="invalid_reply")
    return [r for r in results if isinstance(r, dict)]


def knowhub_retriever(hub: Any, *, min_score: int = 3, types: list[str] | None = None,
                      default_filters: Any = None) -> Callable[..., Any]:
    """A function for ``Agent(knowledge_retriever=...)``: ``(query, num_documents, filters, **kwargs)`` → documents.

    ``filters`` (from Agno) and ``default_filters`` are ANDed; either may be Agno ``FilterExpr`` objects,
    ours, JSON, or Agno's ``{key: value}`` dict. Returns None when nothing matched, like Agno's own. Given an
    `AsyncKnowHub`, it is a coroutine function (for ``agent.arun``, which awaits it).
    """

    def arguments(num_documents: int | None, filters: Any) -> dict[str, Any]:
        combined = [f for f in (filter_json(default_filters), filter_json(filters)) if f]
        return {"top_k": num_documents or DEFAULT_NUM_DOCUMENTS, "min_score": min_score, "types": types,
                "filters": combined or None}

    def documents(found: Any) -> list[dict[str, Any]] | None:
        return as_documents(_results(found), found.get("search_id")) or None

    if _is_async(hub):
        async def async_retriever(query: str, num_documents: int | None = None, filters: Any = None,
                                  **kwargs: Any) -> list[dict[str, Any]] | None:
            return documents(await hub.knowledge_search(query, **arguments(num_documents, filters)))

        return async_retriever

    def retriever(query: str, num_documents: int | None = None, filters: Any = None, **kwargs: Any
                  ) -> list[dict[str, Any]] | None:
        return documents(hub.knowledge_search(query, **arguments(num_documents, filters)))

    return retriever


def _tool_text(found: Any) -> str:
    documents = as_documents(_results(found), found.get("search_id"))
    return json.dumps(documents, indent=2, ensure_ascii=False) if documents else "No documents found"


def _error_text(exc: Exception) -> str:
    message = exc.message if isinstance(exc, KnowHubError) else "the filters are nested too deeply" \
        if isinstance(exc, RecursionError) else str(exc)
    return f"Error searching knowledge base: {message}"


def search_knowledge_base(hub: Any, *, knowledge_filters: Any = None, enable_agentic_filters: bool = False,
                          num_documents: int = DEFAULT_NUM_DOCUMENTS, min_score: int = 3) -> Callable[..., Any]:
    """Agno's ``search_knowledge_base`` tool over KnowHub, returning the JSON text the model reads; any error
    (the server's, or arguments the client cannot send) is that text too, never raised.

    Static ``knowledge_filters`` are fixed here and apply to every search. With
    ``enable_agentic_filters=True`` the tool takes ``filters`` from the model
    (``[{"key": ..., "value": ...}]``) and the seed's precedence holds: the user's
    (static) filters win over the model's; with neither, no filter. Given an `AsyncKnowHub`, the tool is a
    coroutine function.
    """

    def search(query: str, filters: Any) -> Any:
        return hub.knowledge_search(query, top_k=num_documents, min_score=min_score,
                                    filters=filter_json(resolve_filters(filters, knowledge_filters)))

    def run(query: str, filters: Any) -> str:
        try:
            return _tool_text(search(query, filters))
        except _FAILURES as exc:
            return _error_text(exc)

    async def run_async(query: str, filters: Any) -> str:
        try:
            return _tool_text(await search(query, filters))
        except _FAILURES as exc:
            return _error_text(exc)

    asynchronous = _is_async(hub)
    # The annotations are what Agno's Function.from_callable turns into the schema: a filter is an object of
    # strings ({"key": ..., "value": ...}), as in seed 000 and the docstring.
    if enable_agentic_filters:
        def search_knowledge_base_with_filters(query: str, filters: list[dict[str, str]] | None = None) -> str:
            """Use this function to search the knowledge base for information about a query.

            Args:
                query: The query to search for.
                filters (optional): The filters to apply to the search, as [{"key": ..., "value": ...}].
            """
            return run(query, filters)

        async def search_knowledge_base_with_filters_async(query: str,
                                                           filters: list[dict[str, str]] | None = None) -> str:
            return await run_async(query, filters)

        chosen: Callable[..., Any] = search_knowledge_base_with_filters
        if asynchronous:
            search_knowledge_base_with_filters_async.__doc__ = search_knowledge_base_with_filters.__doc__
            chosen = search_knowledge_base_with_filters_async
        chosen.__name__ = "search_knowledge_base"
        return chosen

    def search_knowledge_base_static(query: str) -> str:
        """Use this function to search the knowledge base for information about a query.

        Args:
            query: The query to search for.
        """
        return run(query, None)

    async def search_knowledge_base_static_async(query: str) -> str:
        return await run_async(query, None)

    chosen = search_knowledge_base_static
    if asynchronous:
        search_knowledge_base_static_async.__doc__ = search_knowledge_base_static.__doc__
        chosen = search_knowledge_base_static_async
    chosen.__name__ = "search_knowledge_base"
    return chosen


def search_knowledge_base_schema(enable_agentic_filters: bool = False) -> dict[str, Any]:
    """The chat-completions tool schema of `search_knowledge_base` as in seed 000."""
    properties: dict[str, Any] = {"query": {"type": "string"}}
    if enable_agentic_filters:
        properties["filters"] = {"type": "array", "description": "The filters to apply to the search.",
                                 "items": {"type": "object", "properties": {"key": {"type": "string"},
                                                                            "value": {"type": "string"}}}}
    return {"type": "function", "function": {
        "name": "search_knowledge_base",
        "description": "Use this function to search the knowledge base for information about a query.",
        "parameters": {"type": "object", "properties": properties, "required": ["query"]}}}
