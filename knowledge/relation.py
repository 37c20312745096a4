"""The LLM's judgment of how two items relate (issue 17): duplicate, refinement, contradiction or unrelated.

Conflict detection records what it says about a saved item's close pairs; slim asks it about every pair of
a group before merging, so two items that look alike but give opposite advice are never merged.
"""
from knowledge import llm
from knowledge.models import Knowledge

RELATIONS = ["duplicate", "refinement", "contradiction", "unrelated"]
SYSTEM = (
    "You keep a knowledge base for AI agents true. Compare two items and say how they relate: "
    "'duplicate' (they give the same advice, perhaps in other words or another language), "
    "'refinement' (one adds a condition, a detail or a correction to the other), "
    "'contradiction' (following one means not following the other), or 'unrelated'. "
    "Explain in one or two sentences, in the language of the items."
)
SCHEMA = {
    "type": "object",
    "properties": {
        "relation": {"type": "string", "enum": RELATIONS},
        "explanation": {"type": "string", "maxLength": 2000},
    },
    "required": ["relation", "explanation"],
    "additionalProperties": False,
}


def judge(item: Knowledge, other: Knowledge, *, model: str | None = None) -> dict:
    """The LLM's {relation, explanation} for a pair. Raises llm.LLMError."""
    from resources.selectors import secrets_of

    text = "\n\n".join(f"Item {n}\nTask: {k.task}\nContent: {k.content}" for n, k in ((1, item), (2, other)))
    secrets = secrets_of(r for k in (item, other) for r in k.resources.all())
    # the items' text can steer the model: chat_json's reply holds nothing PostgreSQL refuses (NUL, lone surrogates)
    return llm.chat_json(system=SYSTEM, user=f"How do these two items relate?\n\n{text}", schema=SCHEMA,
                         schema_name="knowledge_relation", model=model, secrets=secrets)
