"""KnowHub client: the seed-003 agent tools over HTTP, sync (`KnowHub`) and async (`AsyncKnowHub`).

>>> from knowhub_client import KnowHub, EQ, IN
>>> with KnowHub("http://localhost:8000", token="kh_...") as hub:
...     item = hub.knowledge_save("Log in to site A", "Use the test account", types=["tool"])
...     hub.knowledge_search("site A login", filters=EQ("types", "tool") & ~IN("tags.domain", ["ads"]))

Integrations: `tools` (OpenAI function calling), `knowhub_retriever` / `search_knowledge_base`
(Agno), `KnowHub.build_context` and `KnowHub.focus_goal_knowledge` (prompts).
"""
from knowhub_client._transport import RetryPolicy
from knowhub_client.agno import knowhub_retriever, search_knowledge_base, search_knowledge_base_schema
from knowhub_client.client import AsyncKnowHub, KnowHub
from knowhub_client.errors import (
    AuthenticationFailed, BadRequest, Conflict, ConnectionFailed, Gone, InvalidArgument, JobFailed, JobTimeout,
    KnowHubError, NotFound, PayloadTooLarge, PermissionDenied, RateLimited, ServerError,
)
from knowhub_client.filters import (
    AND, CONTAINS, EQ, GT, GTE, IN, LT, LTE, NEQ, NIN, NOT, OR, STARTSWITH, FilterExpr,
)
from knowhub_client.tools import async_tools, openai_schemas, tools

__version__ = "0.1.0"

__all__ = [
    "AND", "CONTAINS", "EQ", "GT", "GTE", "IN", "LT", "LTE", "NEQ", "NIN", "NOT", "OR", "STARTSWITH",
    "AsyncKnowHub", "AuthenticationFailed", "async_tools", "BadRequest", "Conflict", "ConnectionFailed", "FilterExpr", "Gone",
    "InvalidArgument",
    "JobFailed", "JobTimeout", "KnowHub", "KnowHubError", "NotFound", "PayloadTooLarge", "PermissionDenied",
    "RateLimited", "RetryPolicy", "ServerError", "knowhub_retriever", "openai_schemas", "search_knowledge_base",
    "search_knowledge_base_schema", "tools",
]
