"""What the knowledge operations send: each operation's reply is rendered by its output serializer here
(agents.operations.Operation.render), so the OpenAPI schema describes exactly what is sent. The search's, which
every search renders, copy their fields cheaply (core.fields.ShallowFieldCopies)."""
from rest_framework import serializers

from core.errors import ErrorBody
from core.fields import ShallowFieldCopies
from knowledge.serializers import REPLY_CASES, EvalSerializer, KnowledgeSerializer


class HitEval(ShallowFieldCopies, serializers.Serializer):
    score = serializers.IntegerField()
    helpful = serializers.IntegerField()
    harmful = serializers.IntegerField()
    confidence = serializers.FloatField()


class SearchHit(ShallowFieldCopies, serializers.Serializer):
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
    superseded_by = serializers.CharField(required=False, help_text="only with include_superseded: the item that replaced this one")
    conflicts = serializers.ListField(child=serializers.DictField(), required=False, help_text=(
        "only when there are some: this item's open conflicts with other items you can read ({conflict_id, kind: "
        "contradiction, refinement or close, with}): read both before acting"))


class SearchOutput(ShallowFieldCopies, serializers.Serializer):
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


class VersionsOutput(serializers.Serializer):
    knowledge_id = serializers.CharField()
    count = serializers.IntegerField()
    results = serializers.ListField(child=serializers.DictField())


class UnmergeOutput(serializers.Serializer):
    knowledge_id = serializers.CharField()
    status = serializers.CharField()
    restored = serializers.ListField(child=serializers.CharField())


class ProposalsOutput(serializers.Serializer):
    count = serializers.IntegerField()
    results = serializers.ListField(child=serializers.DictField(), help_text=(
        "{id, ids, status, proposal: {task, content}, job_id, conflict_id, merged_id, decided_by, created_at, decided_at}"))


class RejectOutput(serializers.Serializer):
    ids = serializers.ListField(child=serializers.CharField())
    rejected = serializers.BooleanField()


class FeedbackEval(EvalSerializer):
    helpful_history = serializers.ListField(child=serializers.DictField(), help_text=(
        f"the newest {REPLY_CASES} helpful cases, oldest first (GET /api/knowledge/{{id}} has them all)"))
    harmful_history = serializers.ListField(child=serializers.DictField(), help_text=(
        f"the newest {REPLY_CASES} harmful cases, oldest first (GET /api/knowledge/{{id}} has them all)"))
    histories_truncated = serializers.BooleanField(help_text="whether older cases were left out of either history")


class FeedbackOutput(KnowledgeSerializer):
    """The reply to PUT /api/knowledge/{id} (rendered by its handler, `serializers.feedback_reply`): the item in
    the seed's shape with the counters after this feedback, each history bounded to its newest cases, so the
    reply costs the same however much feedback the item has had."""

    eval = FeedbackEval()
    job = JobLink(required=False, help_text="only with evolve_feedback: the rewrite job queued")
