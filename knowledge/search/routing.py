"""Optional LLM routing (seed 003): the LLM picks 2*top_k items from a wider pool.

On with KNOWHUB_SEARCH_ROUTING=llm and an LLM configured. The pool is the
best ROUTING_POOL fused candidates; the LLM sees each one's id, task and the
start of its content, and returns ids in order of relevance. Anything it
returns that was not offered is ignored. Should the call fail, search goes on
with the fused order and says so in its notes.
"""
from django.conf import settings

from knowledge import llm

ROUTING_POOL_PER_RESULT = 6
CONTENT_PREVIEW_CHARS = 300

SYSTEM = (
    "You route a search over a knowledge base for AI agents. Given a query and numbered candidate "
    "items, return the ids of the items that help with the query, most relevant first. "
    "Return only ids from the candidates."
)


def routing_enabled() -> bool:
    return settings.KNOWHUB_SEARCH_ROUTING == "llm" and llm.llm_configured()


def route(*, query: str, candidates: list[tuple[str, str, str]], pick: int) -> list[str]:
    """Ids chosen by the LLM from (id, task, content) candidates, best first. Raises llm.LLMError."""
    offered = {item_id for item_id, _, _ in candidates}
    listing = "\n".join(
        f"- id: {item_id}\n  task: {task}\n  content: {content[:CONTENT_PREVIEW_CHARS]}" for item_id, task, content in candidates
    )
    schema = {
        "type": "object",
        "properties": {"ids": {"type": "array", "items": {"type": "string"}, "maxItems": len(candidates)}},
        "required": ["ids"],
        "additionalProperties": False,
    }
    reply = llm.chat_json(
        system=SYSTEM,
        user=f"Query: {query}\nPick at most {pick} items.\nCandidates:\n{listing}",
        schema=schema,
        schema_name="routed_items",
    )
    return [item_id for item_id in dict.fromkeys(reply["ids"]) if item_id in offered][:pick]
