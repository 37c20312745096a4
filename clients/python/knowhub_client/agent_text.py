"""Text an agent shows its model: Agno's `<knowledge_base>` instructions and the goal-focus block (seeds 000-003)."""
from __future__ import annotations

from typing import Any

SEARCH_INSTRUCTIONS = (
    "You have a knowledge base you can search using the {tool} tool. Search before answering "
    "questions—don't assume you know the answer. For ambiguous questions, search first rather than asking for "
    "clarification."
)

AGENTIC_FILTER_INSTRUCTIONS = """The knowledge base contains documents with these metadata filters: {keys}
Always use filters when the user query indicates specific metadata.

Examples:
1. If the user asks about a specific {first_key} like "{first_value}", you MUST use the {tool} tool with the filters parameter set to [{{"key": "{first_key}", "value": "{first_value}"}}].
2. If the user asks for items of one kind, filter on the matching key, e.g. [{{"key": "types", "value": "tool"}}].

General Guidelines:
- Always analyze the user query to identify relevant metadata.
- Use the most specific filter(s) possible to narrow down results.
- If multiple filters are relevant, combine them in the filters parameter (e.g., [{{"key": "{first_key}", "value": "{first_value}"}}, {{"key": "types", "value": "tool"}}]).
- Ensure the filter keys match the valid metadata filters: {keys}.

You can use the {tool} tool to search the knowledge base and get the most relevant documents. Make sure to pass the filters as [{{"key": "<filter_key>", "value": "<filter_value>"}}] objects."""


def filter_key_names(filters_reply: dict[str, Any]) -> list[str]:
    """The keys of GET /api/knowledge/filters that hold values (tags.*, source.*, types, ...)."""
    return list((filters_reply.get("keys") or {}).keys())


def build_context_text(filters_reply: dict[str, Any] | None, tool_name: str = "search_knowledge_base") -> str:
    """Agno's `Knowledge.build_context()`: search instructions, plus filter instructions when agentic, naming the
    search tool the model has (Agno's ``search_knowledge_base``, or the OpenAI tools' ``knowledge_search``)."""
    parts = [SEARCH_INSTRUCTIONS.format(tool=tool_name)]
    if filters_reply is not None:
        keys = filters_reply.get("keys") or {}
        if keys:
            first_key = next((k for k in keys if k.startswith("tags.")), next(iter(keys)))
            samples = _samples(keys[first_key])
            parts.append("")
            parts.append(AGENTIC_FILTER_INSTRUCTIONS.format(
                tool=tool_name, keys=", ".join(keys), first_key=first_key, first_value=samples[0] if samples else "value"))
    return "<knowledge_base>\n" + "\n".join(parts) + "\n</knowledge_base>"


def _samples(key_info: Any) -> list[str]:
    if isinstance(key_info, dict):
        values = key_info.get("samples") or key_info.get("values") or []
        return [str(v.get("value", v)) if isinstance(v, dict) else str(v) for v in values]
    if isinstance(key_info, list):
        return [str(v) for v in key_info]
    return []


def goal_knowledge_text(results: list[dict[str, Any]]) -> str:
    """The block under "📚 相关知识" (related knowledge) that goal focus injects (seed 003)."""
    lines = [f"📚 相关知识 ({len(results)} 条):"]
    if not results:
        lines.append("(none found: consider researching and saving what you learn with knowledge_save)")
    for n, item in enumerate(results, 1):
        ev = item.get("eval") or {}
        lines.append(f"{n}. [{item.get('id')}] {item.get('task', '').strip()}")
        lines.append(f"   {item.get('content', '').strip()}")
        meta = f"   types: {', '.join(item.get('types') or [])}; score {ev.get('score')}, quality {item.get('quality_score')}"
        if item.get("resource_ids"):
            meta += f"; resources: {', '.join(item['resource_ids'])}"
        lines.append(meta)
    return "\n".join(lines)


def agentic_filters_dict(filters: Any) -> dict[str, Any]:
    """Agno's `_resolve_filters`: the model's [{"key": k, "value": v}, {k: v}, ...] as one {key: value} dict."""
    merged: dict[str, Any] = {}
    for item in filters or []:
        if isinstance(item, dict) and set(item) >= {"key", "value"} and len(item) == 2:
            merged[str(item["key"])] = item["value"]
        elif isinstance(item, dict):
            merged.update(item)
        elif hasattr(item, "key") and hasattr(item, "value"):
            merged[item.key] = item.value
    return merged


def resolve_filters(agentic: Any, user: Any) -> Any:
    """Seed 000's precedence: user filters win over the model's; either alone is used; neither is none."""
    if user:
        return user
    agentic_dict = agentic_filters_dict(agentic) if isinstance(agentic, list) else agentic
    return agentic_dict or None


def as_documents(results: list[dict[str, Any]], search_id: str | None = None) -> list[dict[str, Any]]:
    """Search hits as the documents Agno shows its model: content first, with the meta data that matters
    (the search's ``search_id`` too, for the feedback the agent sends on them)."""
    return [{
        "id": r.get("id"), "name": r.get("task"), "content": r.get("content"),
        "meta_data": {"types": r.get("types"), "tags": r.get("tags"), "scopes": r.get("scopes"),
                      "eval": r.get("eval"), "quality_score": r.get("quality_score"),
                      "resource_ids": r.get("resource_ids"), "search_id": search_id},
    } for r in results]
