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
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from knowhub_client.agent_text import as_documents, resolve_filters
from knowhub_client.errors import KnowHubError
from knowhub_client.filters import filter_json

DEFAULT_NUM_DOCUMENTS = 5


def knowhub_retriever(hub: Any, *, min_score: int = 3, types: list[str] | None = None,
                      default_filters: Any = None) -> Callable[..., list[dict[str, Any]] | None]:
    """A function for ``Agent(knowledge_retriever=...)``: ``(query, num_documents, filters, **kwargs)`` → documents.

    ``filters`` (from Agno) and ``default_filters`` are ANDed; either may be Agno ``FilterExpr`` objects,
    ours, JSON, or Agno's ``{key: value}`` dict. Returns None when nothing matched, like Agno's own.
    """

    def retriever(query: str, num_documents: int | None = None, filters: Any = None, **kwargs: Any
                  ) -> list[dict[str, Any]] | None:
        combined = [f for f in (filter_json(default_filters), filter_json(filters)) if f]
        found = hub.knowledge_search(query, top_k=num_documents or DEFAULT_NUM_DOCUMENTS, min_score=min_score,
                                     types=types, filters=combined or None)
        return as_documents(found["results"], found.get("search_id")) or None

    return retriever


def search_knowledge_base(hub: Any, *, knowledge_filters: Any = None, enable_agentic_filters: bool = False,
                          num_documents: int = DEFAULT_NUM_DOCUMENTS, min_score: int = 3) -> Callable[..., str]:
    """Agno's ``search_knowledge_base`` tool over KnowHub, returning the JSON text the model reads.

    Static ``knowledge_filters`` are fixed here and apply to every search. With
    ``enable_agentic_filters=True`` the tool takes ``filters`` from the model
    (``[{"key": ..., "value": ...}]``) and the seed's precedence holds: the user's
    (static) filters win over the model's; with neither, no filter.
    """

    def run(query: str, filters: Any) -> str:
        try:
            found = hub.knowledge_search(query, top_k=num_documents, min_score=min_score, filters=filters)
        except KnowHubError as exc:
            return f"Error searching knowledge base: {exc.message}"
        documents = as_documents(found["results"], found.get("search_id"))
        return json.dumps(documents, indent=2, ensure_ascii=False) if documents else "No documents found"

    if enable_agentic_filters:
        def search_knowledge_base_with_filters(query: str, filters: list[dict[str, Any]] | None = None) -> str:
            """Use this function to search the knowledge base for information about a query.

            Args:
                query: The query to search for.
                filters (optional): The filters to apply to the search, as [{"key": ..., "value": ...}].
            """
            return run(query, filter_json(resolve_filters(filters, knowledge_filters)))

        search_knowledge_base_with_filters.__name__ = "search_knowledge_base"
        return search_knowledge_base_with_filters

    def search_knowledge_base_static(query: str) -> str:
        """Use this function to search the knowledge base for information about a query.

        Args:
            query: The query to search for.
        """
        return run(query, filter_json(knowledge_filters))

    search_knowledge_base_static.__name__ = "search_knowledge_base"
    return search_knowledge_base_static


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
