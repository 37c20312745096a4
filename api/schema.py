"""The OpenAPI side of the REST views: error responses, request shapes that are not an operation's input,
and `for_operation`. Replies are the operations' output serializers (knowledge.outputs, ...)."""
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers

from core.errors import ErrorOutput
from knowledge.outputs import (  # noqa: F401 - the views' names
    BatchOutput, FeedbackOutput, FiltersOutput, JobRef, ListOutput, SearchOutput,
)


class BatchUpdateRequest(serializers.Serializer):
    from knowledge.inputs import FeedbackEntry as _Entry

    feedback_list = serializers.ListField(child=_Entry(), min_length=1, max_length=500)


ERROR_TEXTS = {
    400: "invalid input; `fields` names what is wrong (dotted path, e.g. `source.urls.0`)",
    401: "missing or invalid token",
    403: "not allowed for this token",
    404: "no such item visible to this token",
    409: "conflict: the id or Idempotency-Key is taken by another request, no LLM is configured, or the item is not in a "
         "state this change applies to (changed since `base_updated_at`, merged)",
    410: "the resource expired",
    413: "the request body is too large",
    415: "a file of a type this operation cannot read",
    429: "too many requests; retry after `Retry-After` seconds",
    503: "the database is unavailable or a deployment filter failed; retry after `Retry-After` seconds",
}
READ_STATUSES = (400, 401, 403, 404, 429, 503)


def errors(*extra: int) -> dict:
    """The error responses of an operation: those every operation may send, and `extra`."""
    return {code: OpenApiResponse(ErrorOutput, description=ERROR_TEXTS[code]) for code in sorted({*READ_STATUSES, *extra})}


ERRORS = errors()
WRITE_ERRORS = errors(409, 413)  # a body may be too large; an id, key or LLM may conflict
BODY_ERRORS = errors(413)


def for_operation(name: str, **kwargs):
    """`extend_schema` for a view method that serves the registered operation `name`: the summary
    comes from the registry, and `x-knowhub-operation` names the operation (the parity test reads it)."""
    from agents import operations

    return extend_schema(summary=operations.get(name).summary, extensions={"x-knowhub-operation": name}, **kwargs)
