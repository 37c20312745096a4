"""Small builders for test data, going through the real services."""
from knowledge import services
from resources.models import Resource
from tests.callers import acting

SEED_EXAMPLE = {
    "id": "knowledge-20260305-a1b2",
    "message_id": "msg-xxx",
    "types": ["strategy", "tool"],
    "task": "在什么场景下要完成什么目标",
    "tags": {"category": "preference", "domain": "coding_style"},
    "scopes": ["org:cybertogether"],
    "owner": "agent:research_agent",
    "content": "核心知识内容",
    "resource_ids": ["code/selenium/login", "credentials/website_a"],
    "source": {
        "name": "资源名称",
        "category": "exp",
        "urls": ["https://example.com"],
        "agent_id": "research_agent",
        "submitted_by": "user@example.com",
        "timestamp": "2026-03-05T12:00:00Z",
        "message_id": "msg-xxx",
    },
    "eval": {
        "score": 4,
        "helpful": 5,
        "harmful": 0,
        "confidence": 0.9,
        "helpful_history": [],
        "harmful_history": [],
    },
    "created_at": "2026-03-05T12:00:00Z",
    "updated_at": "2026-03-05T12:00:00Z",
}


def make_resource(resource_id: str, **fields) -> Resource:
    fields.setdefault("title", resource_id)
    fields.setdefault("scopes", ["org:acme", "org:cybertogether"])
    return Resource.objects.create(id=resource_id, **fields)


def make_knowledge(**fields):
    fields.setdefault("task", "Log in to the staging site")
    fields.setdefault("content", "Use the test account; sessions last two hours.")
    fields.setdefault("types", ["tool"])
    fields.setdefault("scopes", ["org:acme"])
    fields.setdefault("owner", "agent:research_agent")
    return services.knowledge_create(acting(), **fields)


def embed_saved():
    """What the worker does after saves (embed every item still without a vector), done here and now.

    For tests about search quality, not about the worker; tests/knowledge/search/test_indexing.py
    checks that the real worker does it.
    """
    from knowledge.search.indexing import embed_pending

    return embed_pending()
