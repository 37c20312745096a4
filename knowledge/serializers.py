"""The seed's JSON shape of a knowledge item (seed 003), in and out."""
from urllib.parse import urlsplit

from django.utils.translation import gettext as _
from rest_framework import serializers

from core.fields import NoUnknownFields, ShallowFieldCopies, StrictCharField, valid_scopes

from knowledge import services
from knowledge.ids import ID_RE
from knowledge.limits import CONTENT_MAX, TAG_NAME, TAG_VALUE_MAX, TAGS_MAX, TASK_MAX
from knowledge.search.indexing import vectors_pending
from knowledge.models import KNOWLEDGE_TYPES, Knowledge



class HttpUrlField(StrictCharField):
    """An absolute http(s) URL: the only kind a page may link to (no javascript:, data:, file:)."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        try:
            parts = urlsplit(value)
        except ValueError:
            parts = None
        if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.netloc:
            raise serializers.ValidationError("must be an http:// or https:// URL")
        return value


def tags_problem(tags, *, kept=()) -> str | None:
    """What is wrong with an item's tags as a whole (their names and number; each value is its field's), or None.
    The API's inputs and the curation UI's forms say the same. `kept`: the names the item has now, which an edit may
    keep whatever they are (an item saved before names were held to this rule, or merged from many, stays editable):
    only names new to it must be ones filters can name, and only an edit that adds tags past TAGS_MAX is refused."""
    if len(tags) > max(TAGS_MAX, len(kept)):
        return _("at most %(most)d tags") % {"most": TAGS_MAX}
    for name in tags:
        if name in kept:
            continue
        if not isinstance(name, str) or not TAG_NAME.fullmatch(name):
            return _("tag name %(name)s: use 1-100 of A-Z a-z 0-9 _ . - (the names filters take)") % {
                "name": repr(name)[:120]}
    return None


class TagsField(serializers.DictField):
    """An item's tags: names that filters can name (`tags.<name>`), at most TAGS_MAX of them, string values.
    `names_checked=False` checks the values only: for an edit, whose names are checked against the item's own
    (`tags_problem(kept=…)`), and for a restore, which brings back what an earlier hub stored."""

    def __init__(self, *, names_checked: bool = True, **kwargs):
        self.names_checked = names_checked
        # a value as sent: EQ("tags.w", "  sp  ") finds the item saved with "  sp  "
        super().__init__(child=StrictCharField(allow_blank=True, max_length=TAG_VALUE_MAX, trim_whitespace=False), **kwargs)

    def to_internal_value(self, data):
        tags = super().to_internal_value(data)
        problem = tags_problem(tags) if self.names_checked else None
        if problem:
            raise serializers.ValidationError(problem)
        return tags


class SourceSerializer(NoUnknownFields, serializers.Serializer):
    name = StrictCharField(required=False, allow_blank=True, max_length=500)
    category = StrictCharField(required=False, allow_blank=True, max_length=100)
    urls = serializers.ListField(child=HttpUrlField(max_length=2000), required=False, max_length=100)
    agent_id = StrictCharField(required=False, allow_blank=True, max_length=200)
    submitted_by = StrictCharField(required=False, allow_blank=True, max_length=200)
    timestamp = StrictCharField(required=False, allow_blank=True, max_length=40)
    message_id = StrictCharField(required=False, allow_blank=True, max_length=200)

    def validate_timestamp(self, value):
        if value and serializers.DateTimeField().to_internal_value(value) is None:
            raise serializers.ValidationError("must be an ISO 8601 date-time")
        return value


COUNTER_MAX = 2**31 - 1  # the counters' column (integer): past it a 400 naming the field, not the database's error


class EvalSerializer(ShallowFieldCopies, serializers.Serializer):
    score = serializers.IntegerField(min_value=1, max_value=5, required=False, default=3)
    helpful = serializers.IntegerField(min_value=0, max_value=COUNTER_MAX, required=False, default=0)
    harmful = serializers.IntegerField(min_value=0, max_value=COUNTER_MAX, required=False, default=0)
    confidence = serializers.FloatField(min_value=0, max_value=1, required=False, default=0.5)
    helpful_history = serializers.ListField(child=serializers.DictField(), required=False, default=list)
    harmful_history = serializers.ListField(child=serializers.DictField(), required=False, default=list)


class KnowledgeSerializer(ShallowFieldCopies, serializers.Serializer):
    """Reads and writes an item exactly as the seed shows it.

    On input `id`, `eval`, `created_at` and `updated_at` are optional: an
    export restored through this serializer comes back identical.
    """

    id = serializers.CharField(required=False, max_length=40)
    message_id = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    types = serializers.ListField(
        child=serializers.ChoiceField(choices=KNOWLEDGE_TYPES), min_length=1, max_length=len(KNOWLEDGE_TYPES)
    )
    task = serializers.CharField(max_length=TASK_MAX)
    tags = TagsField(required=False, default=dict)
    scopes = serializers.ListField(child=serializers.CharField(max_length=200), min_length=1, max_length=50)
    owner = serializers.CharField(max_length=200)
    content = serializers.CharField(max_length=CONTENT_MAX, trim_whitespace=False)  # restored as exported
    resource_ids = serializers.ListField(child=serializers.CharField(max_length=255), required=False, default=list)
    secure_resource_id = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
    source = SourceSerializer(required=False, default=dict)
    eval = EvalSerializer(required=False)
    created_at = serializers.DateTimeField(required=False)
    updated_at = serializers.DateTimeField(required=False)
    status = serializers.CharField(read_only=True, help_text="active, archived, merged or superseded")
    superseded_by = serializers.CharField(read_only=True, allow_null=True,
                                          help_text="the item that replaced this one, when it is superseded")
    supersedes = serializers.ListField(child=serializers.CharField(), read_only=True,
                                       help_text="the items this one replaced")
    vector_status = serializers.ChoiceField(
        choices=["pending", "ready"], read_only=True,
        help_text="pending until a worker has embedded the current text; keyword search finds the item meanwhile")

    def validate_id(self, value):
        if not ID_RE.match(value):
            raise serializers.ValidationError("must look like knowledge-YYYYMMDD-xxxx")
        return value

    def validate_scopes(self, value):
        return valid_scopes(value)

    def create(self, validated_data):
        data = dict(validated_data)
        evaluation = data.pop("eval", None) or EvalSerializer().to_internal_value({})
        return services.knowledge_create(
            self.context["caller"],  # who restores the item (its owner comes with it)
            knowledge_id=data.pop("id", None),
            **data,
            **evaluation,
        )

    def to_representation(self, item: Knowledge) -> dict:
        if getattr(item, "histories_complete", False):  # selectors.knowledge_visible(cases=None): one query
            return knowledge_json(
                item, resource_ids=item.linked_resource_ids, supersedes=sorted(item.supersedes_ids),
                helpful_history=item.recent_helpful[::-1], harmful_history=item.recent_harmful[::-1])
        cases = list(item.feedback_cases.all())
        return knowledge_json(
            item, resource_ids=item.resource_ids, supersedes=sorted(k.id for k in item.supersedes.all()),
            helpful_history=[c.case for c in cases if c.kind == "helpful"],
            harmful_history=[c.case for c in cases if c.kind == "harmful"])


def knowledge_json(item: Knowledge, *, resource_ids: list[str], supersedes: list[str], helpful_history: list[dict],
                   harmful_history: list[dict]) -> dict:
    """The seed's shape of `item`, given its links and the histories to show (oldest case first)."""
    return {
        "id": item.id,
        "message_id": item.message_id,
        "types": list(item.types),
        "task": item.task,
        "tags": dict(item.tags),
        "scopes": list(item.scopes),
        "owner": item.owner,
        "content": item.content,
        "resource_ids": list(resource_ids),
        "secure_resource_id": item.secure_resource_id,
        "source": dict(item.source),
        "eval": {
            "score": item.score,
            "helpful": item.helpful,
            "harmful": item.harmful,
            "confidence": item.confidence,
            "helpful_history": helpful_history,
            "harmful_history": harmful_history,
        },
        "created_at": _iso(item.created_at),
        "updated_at": _iso(item.updated_at),
        "status": item.status,
        "superseded_by": item.superseded_by_id,
        "supersedes": list(supersedes),
        # keyword search finds an item at once; vector search once a worker has embedded it
        "vector_status": "pending" if vectors_pending(item) else "ready",
    }


def _iso(value) -> str:
    return serializers.DateTimeField().to_representation(value)


# The newest cases of each history a feedback reply shows: its cost stays the same however long they grow.
REPLY_CASES = 20


def feedback_reply(item: Knowledge, reported: list) -> dict:
    """The reply to feedback (PUT /api/knowledge/{id}): the item in the seed's shape, each history its newest
    REPLY_CASES cases, oldest first, and `eval.histories_truncated` whether older ones were left out (GET
    /api/knowledge/{id} has them all).

    `item` comes from `selectors.knowledge_visible(cases=REPLY_CASES + 1)`, read before the writes,
    with the counters the writes returned; `reported` are the cases this request stored (the newest)."""
    histories, truncated = {}, False
    for kind in ("helpful", "harmful"):
        cases = [*reversed(getattr(item, f"recent_{kind}")), *(c.case for c in reported if c.kind == kind)]
        truncated = truncated or len(cases) > REPLY_CASES
        histories[kind] = cases[-REPLY_CASES:]
    body = knowledge_json(item, resource_ids=item.linked_resource_ids, supersedes=item.supersedes_ids,
                          helpful_history=histories["helpful"], harmful_history=histories["harmful"])
    body["eval"]["histories_truncated"] = truncated
    return body
