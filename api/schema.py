"""Response shapes for the OpenAPI schema (the views build plain dicts of these shapes)."""
from drf_spectacular.utils import extend_schema, OpenApiResponse
from rest_framework import serializers

from knowledge.serializers import KnowledgeSerializer


class ErrorBody(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    fields = serializers.DictField()


class ErrorOutput(serializers.Serializer):
    error = ErrorBody()


class HitEval(serializers.Serializer):
    score = serializers.IntegerField()
    helpful = serializers.IntegerField()
    harmful = serializers.IntegerField()
    confidence = serializers.FloatField()


class SearchHit(serializers.Serializer):
    id = serializers.CharField()
    task = serializers.CharField()
    content = serializers.CharField()
    types = serializers.ListField(child=serializers.CharField())
    tags = serializers.DictField(child=serializers.CharField())
    scopes = serializers.ListField(child=serializers.CharField())
    owner = serializers.CharField()
    resource_ids = serializers.ListField(child=serializers.CharField())
    eval = HitEval()
    quality_score = serializers.FloatField()
    relevance = serializers.FloatField(
        help_text="calibrated probability (0..1) that the item answers the query; the same scale for every query")
    explanation = serializers.DictField(required=False)


class SearchOutput(serializers.Serializer):
    results = SearchHit(many=True)
    count = serializers.IntegerField()
    search_id = serializers.UUIDField(help_text=(
        "this search, as logged: send it back as `search_id` with feedback on its results (PUT /api/knowledge/{id}, "
        "batch_update entries) so the ranking can be evaluated on your agents' searches"))
    notes = serializers.ListField(child=serializers.CharField(), required=False)


class ListOutput(serializers.Serializer):
    results = KnowledgeSerializer(many=True)
    count = serializers.IntegerField()
    next = serializers.CharField(allow_null=True)


class BatchResult(serializers.Serializer):
    index = serializers.IntegerField()
    knowledge_id = serializers.CharField(allow_null=True)
    ok = serializers.BooleanField()
    error = ErrorBody(required=False)


class BatchOutput(serializers.Serializer):
    results = BatchResult(many=True)
    succeeded = serializers.IntegerField()
    failed = serializers.IntegerField()


class BatchUpdateRequest(serializers.Serializer):
    from knowledge.inputs import FeedbackEntry as _Entry

    feedback_list = serializers.ListField(child=_Entry(), min_length=1, max_length=500)


class JobLink(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.CharField()
    url = serializers.CharField()


class JobRef(serializers.Serializer):
    job = JobLink()


class FiltersOutput(serializers.Serializer):
    operators = serializers.ListField(child=serializers.CharField())
    keys = serializers.DictField()
    static_filters = serializers.JSONField(allow_null=True)
    example = serializers.JSONField()


ERROR_TEXTS = {
    400: "invalid input; `fields` names what is wrong (dotted path, e.g. `source.urls.0`)",
    401: "missing or invalid token",
    403: "not allowed for this token",
    404: "no such item visible to this token",
    409: "conflict: the id or Idempotency-Key is taken by another request, or no LLM is configured",
    410: "the resource expired",
    413: "the request body is too large",
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
