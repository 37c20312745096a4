"""One JSON error shape for the whole API: {"error": {"code", "message", "fields"}}.

`message` starts with the dotted path of the first field at fault (`source.urls.0: ...`).
The database being unreachable is a 503 with `Retry-After`; a value the database refuses
that validation missed is a 400; a body that stopped arriving (the web server's read deadline,
knowhub_site/gunicorn_conf.py) is a 408; anything else unexpected is a JSON 500, never an HTML page.
"""
import logging

import psycopg
from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, InterfaceError, OperationalError
from django.http import Http404, JsonResponse, UnreadablePostError
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response

try:
    from psycopg_pool import PoolTimeout
except ImportError:  # psycopg_pool is optional (only with the pool option)
    PoolTimeout = OperationalError

logger = logging.getLogger(__name__)


class ErrorBody(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    fields = serializers.DictField()


class ErrorOutput(serializers.Serializer):
    """The one error shape: {"error": {"code", "message", "fields"}}."""

    error = ErrorBody()


DATABASE_DOWN = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)
# PostgreSQL rolled the transaction back because it collided with another (two requests locking the same rows in
# opposite orders): nothing of it was written, so repeating the request is safe, even a feedback report's
WRITE_COLLISIONS = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
WRITE_COLLISION_RETRY_SECONDS = 1
RETRY_AFTER_SECONDS = 5
RATE_LIMIT_RETRY_SECONDS = 1  # a 429 from a filter that did not say when to come back


class DomainError(Exception):
    """An error raised on purpose by a service, an operation or a filter, mapped to the API's shape here, once.

    Subclasses set `status` (a 4xx) and `code`; `field` names the input at fault (a 400's message then
    starts with it), `retry_after` the seconds to send as Retry-After. Each app defines its own
    (knowledge.errors, resources.services, knowledge.llm, agents.chain) without this module knowing them.
    """

    status = 400
    code = "invalid"

    def __init__(self, message: str, *, field: str | None = None, retry_after: int | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.retry_after = retry_after

    def api_fields(self) -> dict:
        if self.field:
            return {self.field: [self.message]}
        return {"non_field_errors": [self.message]} if self.status == 400 else {}

    def api_message(self) -> str:
        if self.status == 400:
            return f"{self.field or 'non_field_errors'}: {self.message}"
        return self.message


def error_payload(code: str, message: str, fields: dict | None = None) -> dict:
    return {"code": code, "message": message, "fields": _flatten(fields or {})}


def error_response(status_code: int, code: str, message: str, fields: dict | None = None) -> Response:
    return Response({"error": error_payload(code, message, fields)}, status=status_code)


def _flatten(detail) -> dict:
    if isinstance(detail, dict):
        return {key: _messages(value) for key, value in detail.items()}
    return {}


def _messages(value):
    if isinstance(value, dict):
        return {k: _messages(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_messages(v) for v in value] if any(isinstance(v, (dict, list)) for v in value) else [str(v) for v in value]
    return [str(value)]


def first_path(fields: dict) -> tuple[str, list]:
    """The dotted path to the first message in flattened `fields`, and that message list."""
    path, value = next(iter(fields.items()), ("non_field_errors", [_("invalid input")]))
    while isinstance(value, dict) or (isinstance(value, list) and not all(isinstance(v, str) for v in value)):
        entries = [(k, v) for k, v in (value.items() if isinstance(value, dict) else enumerate(value)) if v]
        if not entries:
            break
        key, value = entries[0]
        path = f"{path}.{key}"
    return path, value


def invalid_fields(detail) -> tuple[str, dict]:
    """A validation error's message, starting with the dotted path of its first field, and its fields."""
    fields = _flatten(detail) if isinstance(detail, dict) else {"non_field_errors": _messages(detail)}
    name, value = first_path(fields)
    return f"{name}: {first_message(value)}", fields


def body_too_large_message(limit: int | None = None) -> str:
    """A request body over `limit` (DATA_UPLOAD_MAX_MEMORY_SIZE), said the same by the REST API and the MCP server."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE if limit is None else limit
    return _("request body is larger than %(limit)s bytes") % {"limit": f"{limit:,}"}


def body_not_received_message() -> str:
    """A request body that stopped arriving (the read deadline, or the client went away), as Django's reader or the
    chunked body's (knowhub_site/chunked_body.py) found it."""
    return _("the request's body did not arrive in full in time")


def error_json(status_code: int, code: str, message: str, fields: dict | None = None) -> JsonResponse:
    """The API's error shape outside DRF: a plain Django view or handler."""
    return JsonResponse({"error": error_payload(code, message, fields)}, status=status_code)


def unavailable_response() -> Response:
    response = error_response(status.HTTP_503_SERVICE_UNAVAILABLE, "unavailable",
                              _("the database is unavailable; retry later"))
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def first_message(value) -> str:
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list) and value:
        return first_message(value[0])
    return str(value)


def api_exception_handler(exc, context):
    from rest_framework.views import exception_handler  # here: importing DRF's views loads the auth classes

    if isinstance(exc, WRITE_COLLISIONS) or isinstance(exc.__cause__, WRITE_COLLISIONS):  # Django wraps psycopg's
        logger.warning("a write collided with another and was rolled back: %s", exc)
        response = error_response(status.HTTP_503_SERVICE_UNAVAILABLE, "write_conflict",
                                  _("another request changed the same items at the same moment; nothing was written: "
                                    "retry"))
        response["Retry-After"] = str(WRITE_COLLISION_RETRY_SECONDS)
        return response
    if isinstance(exc, DATABASE_DOWN):
        logger.warning("database unavailable: %s: %s", type(exc).__name__, exc)
        return unavailable_response()
    if isinstance(exc, DataError):  # a value validation let through; the SQL stays in the log
        logger.warning("the database refused a value: %s", exc)
        return error_response(status.HTTP_400_BAD_REQUEST, "invalid", "non_field_errors: " + _("the database refused a value"))
    if isinstance(exc, DomainError):  # every app's typed errors, filters' included
        response = error_response(exc.status, exc.code, exc.api_message(), exc.api_fields())
        if exc.retry_after is not None or exc.status in (429, 503):
            default = RATE_LIMIT_RETRY_SECONDS if exc.status == 429 else RETRY_AFTER_SECONDS
            response["Retry-After"] = str(max(1, int(exc.retry_after or default)))
        return response
    if isinstance(exc, RequestDataTooBig):
        return error_response(413, "too_large", body_too_large_message())
    if isinstance(exc, UnreadablePostError):  # the client stopped sending its body: the read deadline, or it went away
        logger.info("request body not received in full: %s", exc)
        return error_response(408, "request_timeout", body_not_received_message())
    if isinstance(exc, (SuspiciousOperation, DjangoValidationError)):  # e.g. too many query parameters
        message = "; ".join(exc.messages) if isinstance(exc, DjangoValidationError) else str(exc)
        return error_response(status.HTTP_400_BAD_REQUEST, "invalid", f"non_field_errors: {message}")
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    response = exception_handler(exc, context)
    if response is None:
        logger.error("unexpected error", exc_info=exc)
        return error_response(status.HTTP_500_INTERNAL_SERVER_ERROR, "server_error", _("an unexpected error; it is logged"))
    if isinstance(exc, exceptions.ValidationError):
        message, fields = invalid_fields(exc.detail)
        response.data = {"error": {"code": "invalid", "message": message, "fields": fields}}
        return response
    detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
    code = getattr(detail, "code", None) or getattr(exc, "default_code", "error")
    if isinstance(exc, exceptions.ParseError):  # a 400 too: its message starts with where the problem is
        response.data = {"error": {"code": str(code), "message": f"non_field_errors: {detail}",
                                   "fields": {"non_field_errors": [str(detail)]}}}
        return response
    response.data = {"error": {"code": str(code), "message": str(detail), "fields": {}}}
    return response


@csrf_exempt  # a POST with a session cookie gets this 404, not Django's HTML CSRF page
def api_not_found(request, *args, **kwargs) -> JsonResponse:
    """Any /api/ path no operation answers: the error shape, not Django's HTML page."""
    return error_json(404, "not_found", _("no API operation at %(path)s") % {"path": request.path})


def _answers_in_json(request) -> bool:
    return request.path.startswith("/api/") or request.path in ("/healthz", "/metrics", "/mcp")


def bad_request(request, exception=None):
    """Django's 400 handler (`handler400`): a request refused before any view ran — a Host header not in
    ALLOWED_HOSTS, a form over DATA_UPLOAD_MAX_MEMORY_SIZE, too many fields. Under /api/ (and the health, metrics and
    MCP paths) in the API's error shape, as everything there; a body over the limit is a 413 wherever it was sent,
    a page saying so in the UI. Anything else in the UI: Django's own 400 page."""
    from django.core.exceptions import DisallowedHost
    from django.http import HttpResponse
    from django.template import loader
    from django.views.defaults import bad_request as django_bad_request

    too_large = isinstance(exception, RequestDataTooBig)
    if _answers_in_json(request):
        if too_large:
            return error_json(413, "too_large", body_too_large_message())
        if isinstance(exception, DisallowedHost):
            return error_json(400, "bad_host", _("the Host header names no host this server answers to"))
        return error_json(400, "invalid", f"non_field_errors: {exception}")
    if too_large:
        page = loader.get_template("413.html").render({"limit": f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,}"})
        return HttpResponse(page, status=413)  # rendered as Django renders its error pages: without the request
    return django_bad_request(request, exception)
