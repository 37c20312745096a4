"""What resource operations take and send (seed 003, scenarios 1-4)."""
from rest_framework import serializers

from core.fields import SCOPE_RE, SCOPES_MAX, NoUnknownFields, StrictBooleanField, StrictCharField, StrictRegexField
from resources.models import RESOURCE_ID_PATTERN, ResourceContentType


class ResourceInput(NoUnknownFields, serializers.Serializer):
    id = StrictRegexField(RESOURCE_ID_PATTERN, max_length=255,
                                error_messages={"invalid": "must be path-like, e.g. code/selenium/login"})
    title = StrictCharField(max_length=300)  # a one-line name: trimmed, as a task is
    # as sent: code keeps its indentation, a password its spaces
    body = StrictCharField(required=False, allow_blank=True, default="", max_length=1_000_000, trim_whitespace=False)
    secure_body = StrictCharField(required=False, allow_blank=True, default="", max_length=100_000, trim_whitespace=False)
    content_type = serializers.ChoiceField(choices=ResourceContentType.values, default="text")
    metadata = serializers.DictField(required=False, default=dict)
    scopes = serializers.ListField(child=StrictRegexField(SCOPE_RE.pattern, max_length=200), required=False, min_length=1,
                                   max_length=SCOPES_MAX)
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)

    def validate(self, attrs):
        # Seed scenario 3 puts a cookie's expiry in metadata: honour it there too.
        if attrs.get("expires_at") is None and attrs.get("metadata", {}).get("expires_at"):
            try:
                attrs["expires_at"] = serializers.DateTimeField().to_internal_value(attrs["metadata"]["expires_at"])
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"metadata": {"expires_at": exc.detail}}) from exc
        return attrs


class ResourceGetInput(serializers.Serializer):
    reveal = StrictBooleanField(default=False, help_text="include secure_body (tokens with secret access only)")


class ResourceOutput(serializers.Serializer):
    """A resource as the API sends it: never its secret, except `secure_body` on a reveal (GET ...?reveal=true),
    which `resources.operations.resource_get` hands over as `revealed_secret` (never read from the model here)."""

    id = serializers.CharField()
    title = serializers.CharField()
    body = serializers.CharField()
    content_type = serializers.CharField()
    metadata = serializers.DictField()
    scopes = serializers.ListField(child=serializers.CharField())
    owner = serializers.CharField()
    expires_at = serializers.DateTimeField(allow_null=True)
    has_secret = serializers.BooleanField()
    version = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_version(self, resource) -> int:
        return resource.versions.count() + 1

    def to_representation(self, resource):
        data = super().to_representation(resource)
        revealed = getattr(resource, "revealed_secret", None)
        if revealed is not None:
            data["secure_body"] = revealed
        return data
