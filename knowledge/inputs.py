"""Request bodies and query parameters of the agent API (seed 003)."""
import json
import sys
from collections.abc import Iterable, Mapping

from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.safe_json import MAX_DEPTH, json_problem
from knowledge.limits import (
    BULK_SAVE_MAX, CONTENT_MAX, EVOLVE_FEEDBACK_MAX, QUERY_MAX, REASON_MAX, RESOURCE_IDS_MAX, SCOPE_MAX, TASK_MAX,
)
from knowledge.models import KNOWLEDGE_TYPES
from knowledge.search.filters import FilterError, parse_filter
from knowledge.search.rerank import ANSWER_FLOOR, RANK_MODES, RELATIVE_FLOOR, RELEVANCE_FLOOR
from core.fields import (
    SCOPES_MAX, NoUnknownFields, StrictBooleanField, StrictCharField, StrictFloatField, StrictIntegerField, valid_scopes,
)
from knowledge.serializers import SourceSerializer, TagsField, tags_problem
from knowledge.services import DOCUMENT_KEY


class CommaListField(serializers.ListField):
    """`a,b` in a query string, or a JSON list in a body; an empty value (`?scopes=,`, `[""]`) is refused. It has a
    `max_length` (no default: every use says how many): a longer list is refused before any element is checked."""

    def __init__(self, *, max_length: int, **kwargs):
        super().__init__(max_length=max_length, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, str):
            data = [data]
        if isinstance(data, list) and all(isinstance(part, str) for part in data):
            # ?types=a,b and ?types=a&types=b both work
            data = [piece.strip() for part in data for piece in part.split(",")]
            if "" in data:
                raise serializers.ValidationError(_("an empty value; give names separated by commas"))
        if isinstance(data, list) and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


def _search_types():
    """A search's or a list's `types`: names from the closed set, no more of them than the set has."""
    return CommaListField(child=serializers.ChoiceField(choices=KNOWLEDGE_TYPES), required=False, default=list,
                          max_length=len(KNOWLEDGE_TYPES))


def _search_scopes():
    """A search's or a list's `scopes` to narrow to: each kind:name (`valid_scopes`), as many as an item may hold."""
    return CommaListField(child=StrictCharField(max_length=SCOPE_MAX), required=False, default=list,
                          max_length=SCOPES_MAX)


@extend_schema_field({
    "description": 'A filter expression, e.g. {"op": "EQ", "key": "tags.domain", "value": "coding_style"}; '
    "JSON text in a query string. See GET /api/knowledge/filters.",
    "oneOf": [{"type": "object"}, {"type": "array"}, {"type": "string"}],
})
class FilterField(serializers.Field):
    """A filter expression: JSON text (query string) or a JSON value (body)."""

    def to_internal_value(self, data):
        if isinstance(data, str) and not data.strip():
            data = None  # as an empty ?filters= is: no filter
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise serializers.ValidationError(_("not valid JSON: %(problem)s") % {"problem": exc.msg}) from exc
            except RecursionError:
                raise serializers.ValidationError(_("nests deeper than %(depth)s levels") % {"depth": MAX_DEPTH}) from None
            except ValueError:  # not a JSONDecodeError: an integer past Python's int_max_str_digits (4,300)
                raise serializers.ValidationError(_("not valid JSON: %(problem)s") % {
                    "problem": f"a number has more than {sys.get_int_max_str_digits()} digits"}) from None
        found = json_problem(data)
        if found:
            where, problem = found
            raise serializers.ValidationError(f"{where}: {problem}" if where != "non_field_errors" else problem)
        try:
            return parse_filter(data)
        except FilterError as exc:
            raise serializers.ValidationError(exc.message) from exc

    def to_representation(self, value):
        return value.to_dict()


class SearchInput(NoUnknownFields, serializers.Serializer):
    q = StrictCharField(max_length=QUERY_MAX, allow_blank=True, required=False, default="")
    top_k = StrictIntegerField(min_value=1, max_value=100, default=5)
    min_score = StrictIntegerField(min_value=1, max_value=5, default=3)
    types = _search_types()
    scopes = _search_scopes()
    filters = FilterField(required=False, default=None)
    rank = serializers.ChoiceField(choices=RANK_MODES, default="quality")
    answer_floor = StrictFloatField(
        min_value=0.0, max_value=1.0, default=ANSWER_FLOOR,
        help_text="the calibrated relevance the best candidate must reach, else the query has no answer (an empty list)")
    relevance_floor = StrictFloatField(
        min_value=0.0, max_value=1.0, default=RELEVANCE_FLOOR,
        help_text="the least calibrated relevance a result may have")
    relevance_ratio = StrictFloatField(
        min_value=0.0, max_value=1.0, default=RELATIVE_FLOOR,
        help_text="the least relevance a result may have as a share of the best candidate's")
    explain = StrictBooleanField(default=False)
    include_superseded = StrictBooleanField(
        default=False, help_text="also search items a better one superseded (each names it in `superseded_by`)")

    def validate_scopes(self, value):
        return valid_scopes(value)


@extend_schema_field({
    "type": "string", "maxLength": 200, "pattern": "^[A-Za-z0-9_-]*$",
    "description": "Opaque: the `next` of the previous page, unchanged. Any other value is refused (400).",
})
class CursorField(StrictCharField):
    def to_internal_value(self, data):
        from knowledge.pagination import decode_cursor

        value = super().to_internal_value(data)
        try:
            return decode_cursor(value) if value else None
        except ValueError as exc:
            raise serializers.ValidationError(_("not a cursor from a previous page's `next`")) from exc


class KnowledgeListInput(NoUnknownFields, serializers.Serializer):
    limit = StrictIntegerField(min_value=1, max_value=100, default=10)
    types = _search_types()
    scopes = _search_scopes()
    cursor = CursorField(required=False, allow_blank=True, default=None, max_length=200)

    def validate_scopes(self, value):
        return valid_scopes(value)


class SaveEvalInput(NoUnknownFields, serializers.Serializer):
    """`eval` on a save: the score and confidence to start with. The counters and histories come from feedback."""

    # JSON numbers; the CSV import (ingest.importer) gives both as the cells' text and says so (core.fields.TEXT_VALUES)
    score = StrictIntegerField(min_value=1, max_value=5, required=False)
    confidence = StrictFloatField(min_value=0.0, max_value=1.0, required=False)

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            counted = [key for key in ("helpful", "harmful", "helpful_history", "harmful_history") if key in data]
            if counted:
                raise serializers.ValidationError(
                    {key: ["set by feedback (PUT /api/knowledge/{id}), not on save"] for key in counted})
        return super().to_internal_value(data)


class KnowledgeCreateInput(NoUnknownFields, serializers.Serializer):
    """POST /api/knowledge: the seed's request body."""

    task = StrictCharField(max_length=TASK_MAX)
    content = StrictCharField(max_length=CONTENT_MAX, trim_whitespace=False)
    types = serializers.ListField(child=serializers.ChoiceField(choices=KNOWLEDGE_TYPES), min_length=1,
                                  max_length=len(KNOWLEDGE_TYPES))
    tags = TagsField(required=False, default=dict)
    scopes = serializers.ListField(child=StrictCharField(max_length=SCOPE_MAX), required=False, min_length=1,
                                   max_length=SCOPES_MAX)
    owner = StrictCharField(max_length=200, required=False)
    resource_ids = serializers.ListField(child=StrictCharField(max_length=255), required=False, default=list,
                                         max_length=RESOURCE_IDS_MAX)
    source = SourceSerializer(required=False, default=dict)
    score = StrictIntegerField(min_value=1, max_value=5, required=False)  # text only from a CSV, as SaveEvalInput's
    eval = SaveEvalInput(required=False, help_text="the seed's `eval`: `score` and `confidence` to start with")
    message_id = StrictCharField(max_length=200, required=False, allow_blank=True, default="")
    secure_resource_id = StrictCharField(
        max_length=255, required=False, allow_blank=True, default="",
        help_text="the seed's reference to a secret-holding resource (a credential or cookie); kept, and linked")

    def validate(self, attrs):
        given = attrs.pop("eval", {})
        if "score" in given and "score" in attrs and given["score"] != attrs["score"]:
            raise serializers.ValidationError({"eval": {"score": ["differs from `score`; give one of them"]}})
        attrs["score"] = attrs.get("score", given.get("score", 3))
        if "confidence" in given:
            attrs["confidence"] = given["confidence"]
        source_message = (attrs.get("source") or {}).get("message_id") or ""
        message_id = attrs.get("message_id") or ""
        if message_id and source_message and message_id != source_message:
            raise serializers.ValidationError({"message_id": ["differs from `source.message_id`; give one of them"]})
        attrs["message_id"] = message_id or source_message
        if attrs["message_id"]:
            attrs["source"] = {**(attrs.get("source") or {}), "message_id": attrs["message_id"]}
        return attrs

    def validate_scopes(self, value):
        return valid_scopes(value)


class KnowledgePatchInput(NoUnknownFields, serializers.Serializer):
    """PATCH /api/knowledge/{id}: plain edits by the item's owner; each keeps a version."""

    task = StrictCharField(max_length=TASK_MAX, required=False)
    content = StrictCharField(max_length=CONTENT_MAX, required=False, trim_whitespace=False)
    tags = TagsField(required=False, names_checked=False)  # against the item's own names: operations.knowledge_edit
    types = serializers.ListField(child=serializers.ChoiceField(choices=KNOWLEDGE_TYPES), min_length=1, required=False,
                                  max_length=len(KNOWLEDGE_TYPES))
    reason = StrictCharField(max_length=REASON_MAX, required=False, allow_blank=True, default="")
    base_updated_at = serializers.DateTimeField(required=False, help_text=(
        "the item's `updated_at` as you read it (GET's reply): if the item changed since, the edit is refused "
        "(409 naming base_updated_at) instead of undoing that change; without it the last edit wins"))

    def validate(self, attrs):
        if not set(attrs) - {"reason"}:
            raise serializers.ValidationError({"non_field_errors": ["give at least one of task, content, tags, types"]})
        return attrs


class CaseField(serializers.DictField):
    """A feedback case: task, outcome, reason, timestamp, ... (an object of at most 20 keys, not counting
    `added_keys`: those a stored case holds beyond what was sent, for an import of stored cases)."""

    def __init__(self, *args, added_keys: tuple[str, ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.added_keys = added_keys

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        sent = {key: item for key, item in value.items() if key not in self.added_keys}
        if len(sent) > 20:
            raise serializers.ValidationError(_("a case has at most 20 keys"))
        if len(json.dumps(sent, default=str)) > 20_000:
            raise serializers.ValidationError(_("a case is at most 20,000 characters of JSON"))
        for key in set(value) & set(self.added_keys):
            if not isinstance(value[key], str) or len(value[key]) > 200:
                raise serializers.ValidationError(_("a case's %(key)s is a string of at most 200 characters") % {"key": key})
        return value


SEARCH_ID_HELP = ("the `search_id` of the search that returned the item: links the case to that search, "
                  "so the ranking can be evaluated on it (`manage.py ranking_eval`)")


class KnowledgeUpdateInput(NoUnknownFields, serializers.Serializer):
    """PUT /api/knowledge/{id} (seed 003)."""

    add_helpful_case = CaseField(required=False, allow_null=True)
    add_harmful_case = CaseField(required=False, allow_null=True)
    update_score = StrictIntegerField(min_value=1, max_value=5, required=False, allow_null=True)
    evolve_feedback = StrictCharField(max_length=EVOLVE_FEEDBACK_MAX, required=False, allow_null=True, allow_blank=True)
    search_id = serializers.UUIDField(required=False, allow_null=True, help_text=SEARCH_ID_HELP)

    def validate(self, attrs):
        changes = [name for name in self.fields if name != "search_id"]
        if not any(attrs.get(k) not in (None, "") for k in changes):
            raise serializers.ValidationError({"non_field_errors": [f"give at least one of {', '.join(changes)}"]})
        return attrs


class FeedbackEntry(NoUnknownFields, serializers.Serializer):
    knowledge_id = StrictCharField(max_length=40)
    is_helpful = StrictBooleanField()
    case = CaseField(required=False, default=dict)
    search_id = serializers.UUIDField(required=False, allow_null=True, default=None, help_text=SEARCH_ID_HELP)


class BatchUpdateInput(NoUnknownFields, serializers.Serializer):
    feedback_list = serializers.ListField(child=serializers.DictField(), min_length=1, max_length=500)


class BulkSaveInput(NoUnknownFields, serializers.Serializer):
    """POST /api/knowledge/bulk: up to BULK_SAVE_MAX new items, each the body of POST /api/knowledge."""

    items = serializers.ListField(child=serializers.DictField(), min_length=1, max_length=BULK_SAVE_MAX,
                                  help_text="each item as POST /api/knowledge takes it; checked one by one")


class SlimInput(NoUnknownFields, serializers.Serializer):
    model = StrictCharField(max_length=200, required=False, allow_blank=True, default="")
    dry_run = StrictBooleanField(default=False)


# --- the same rules for values that come another way than a request (the admin's forms, imports) ---------------

def source_check(source) -> None:
    """An item's `source` held to the rules of the `source` a save takes (`SourceSerializer`: known keys, http(s)
    URLs, lengths, an ISO 8601 timestamp): a ValidationError under `source`. Its `document` (what the hub read the
    item from: a document, a file) is the hub's own, never given by a save, and is not judged."""
    given = {key: value for key, value in source.items() if key != DOCUMENT_KEY} if isinstance(source, Mapping) else source
    entry = SourceSerializer(data=given)
    if not entry.is_valid():
        errors = entry.errors
        raise serializers.ValidationError({"source": errors.get("non_field_errors", errors)})


def source_links_check(source) -> None:
    """The links of an item's stored `source` held to the rule a save holds them to (`SourceSerializer`'s `urls`:
    each an absolute http(s) URL, no `javascript:`), a ValidationError naming `source.urls.<n>`: what a restore (the
    import of an export, which keeps every value as it was) checks of a source. Its other values the hub itself may
    have written past a save's limits (a document's title as its `name`, a merge's union of its items' `urls`)."""
    if not isinstance(source, Mapping):
        raise serializers.ValidationError({"source": [serializers.DictField.default_error_messages["not_a_dict"].format(
            input_type=type(source).__name__)]})
    urls = source.get("urls") or []
    if not isinstance(urls, list):
        raise serializers.ValidationError({"source": {"urls": [serializers.ListField.default_error_messages[
            "not_a_list"].format(input_type=type(urls).__name__)]}})
    link = SourceSerializer().fields["urls"].child  # the API's own field: its scheme, length and character rules
    refused = {}
    for n, url in enumerate(urls):
        try:
            link.run_validation(url)
        except serializers.ValidationError as exc:
            refused[n] = exc.detail
    if refused:
        raise serializers.ValidationError({"source": {"urls": refused}})


def item_changes_check(changes: Mapping, *, kept_tags: Iterable[str] = ()) -> None:
    """A change of an existing item's fields (the admin's form; `services.knowledge_change_fields` stores it) held to
    the API's rules, a ValidationError naming each field it refuses: task, content, tags and types as PATCH
    /api/knowledge/{id} takes them (tag names the item has, `kept_tags`, may stay whatever they are); scopes, owner,
    message_id, score and confidence as POST /api/knowledge takes them for a new item (no request changes them in
    place); source as `source_check`."""
    errors = {}
    text = {name: changes[name] for name in ("task", "content", "tags", "types") if name in changes}
    if text:
        edit = KnowledgePatchInput(data=text)
        if not edit.is_valid():
            errors.update(edit.errors)
        elif "tags" in text:
            problem = tags_problem(text["tags"], kept=list(kept_tags))
            if problem:
                errors["tags"] = [problem]
    plain = {name: changes[name] for name in ("scopes", "owner", "message_id", "score") if name in changes}
    if "confidence" in changes:
        plain["eval"] = {"confidence": changes["confidence"]}
    if plain:
        new = KnowledgeCreateInput(data=plain, partial=True)
        if not new.is_valid():
            refused = dict(new.errors)
            if isinstance(refused.get("eval"), Mapping):
                refused.update(refused.pop("eval"))  # `eval.confidence` is the item's `confidence`
            errors.update(refused)
    if "source" in changes:
        try:
            source_check(changes["source"])
        except serializers.ValidationError as exc:
            errors.update(exc.detail)
    if errors:
        raise serializers.ValidationError(errors)
