"""One log line and one latency observation per HTTP request, under a request id.

The first middleware: it starts the request's `core.request_context.Context` (the
client's sane `X-Request-ID`, or a new one), so every log line of the request carries
the id and the jobs it queues inherit it (job_observability.py); it returns the id as
`X-Request-ID`. After the response it logs method, route (the URL pattern, never the
query string or the body), status, duration, agent and operation, and observes
`knowhub_http_request_duration_seconds` by URL name, method and status class.
"""
import time

from core import metrics, request_context
from core.logs import log_request
from knowhub_site import db_pool

HEADER = "X-Request-ID"


def _entry(path: str) -> str:
    return "rest" if path.startswith("/api/") else "ui"


def _agent(request) -> str:
    """The token's agent id, or user:<id> for a person; "" when anonymous."""
    user = getattr(request, "user", None)
    token = getattr(user, "token", None)
    if token is not None:
        return token.agent_id
    if user is not None and getattr(user, "is_authenticated", False) and getattr(user, "pk", None) is not None:
        return f"user:{user.pk}"
    return ""


def _route(request) -> tuple[str, str]:
    """(the URL pattern, the URL name) the request resolved to; ("", "unmatched") when none did."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return "", "unmatched"
    return "/" + match.route.lstrip("^").rstrip("$"), match.view_name or "unnamed"


class RequestLogMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        context = request_context.Context(
            request_id=request_context.request_id_from(request.headers.get(HEADER)), entry=_entry(request.path))
        started = time.perf_counter()
        with request_context.bound(context):
            response = self.get_response(request)
            response[HEADER] = context.request_id
            elapsed = time.perf_counter() - started
            route, name = _route(request)
            context.agent = _agent(request)
            metrics.HTTP_SECONDS.labels(route=name, method=request.method, status=f"{response.status_code // 100}xx").observe(elapsed)
            db_pool.record_pool_use()
            log_request(context, method=request.method, route=route, url_name=name, status=response.status_code,
                        seconds=elapsed)
        return response
