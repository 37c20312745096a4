"""One JSON error shape for the whole API: {"error": {"code", "message", "fields"}}."""
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from agents.chain import ChainError
from knowledge.errors import KnowledgeError, KnowledgeIdConflictError
from knowledge.llm import LLMNotConfigured
from resources.services import ResourceExistsError


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


def first_message(value) -> str:
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list) and value:
        return first_message(value[0])
    return str(value)


def api_exception_handler(exc, context):
    if isinstance(exc, LLMNotConfigured):
        return error_response(status.HTTP_409_CONFLICT, "llm_not_configured", str(exc))
    if isinstance(exc, (KnowledgeIdConflictError, ResourceExistsError)):
        return error_response(status.HTTP_409_CONFLICT, "conflict", exc.message, {exc.field: [exc.message]})
    if isinstance(exc, KnowledgeError):  # FilterError, UnknownResourceError, ...
        field = exc.field or "non_field_errors"
        return error_response(status.HTTP_400_BAD_REQUEST, "invalid", f"{field}: {exc.message}", {field: [exc.message]})
    if isinstance(exc, ChainError):
        err = exc.error
        return error_response(err.status, err.code, f"{err.filter}: {err.reason}" if err.filter else err.reason, err.fields)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return error_response(413, "too_large", f"request body is larger than {limit:,} bytes")
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        name, value = next(iter(fields.items()), ("non_field_errors", ["invalid input"]))
        message = f"{name}: {first_message(value)}"
        response.data = {"error": {"code": "invalid", "message": message, "fields": fields}}
        return response
    detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
    code = getattr(detail, "code", None) or getattr(exc, "default_code", "error")
    response.data = {"error": {"code": str(code), "message": str(detail), "fields": {}}}
    return response
