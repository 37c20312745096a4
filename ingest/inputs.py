"""The bodies of the import and export operations."""
from django.conf import settings
from rest_framework import serializers

from core.fields import SCOPE_RE, NoUnknownFields
from knowledge.models import KNOWLEDGE_TYPES


def _scopes(value):
    bad = [s for s in value if not SCOPE_RE.match(s)]
    if bad:
        raise serializers.ValidationError(f"scopes look like kind:name (org:acme, user:bob); got {bad}")
    return value


class ExportInput(NoUnknownFields, serializers.Serializer):
    scopes = serializers.ListField(child=serializers.CharField(max_length=200), required=False, default=list,
                                   help_text="only items and resources in these scopes (default: all you can read)")
    passphrase = serializers.CharField(required=False, allow_blank=True, default="", max_length=1000,
                                       help_text="seal the secrets under this passphrase, for another installation")

    def validate_scopes(self, value):
        return _scopes(value)


class ImportInput(NoUnknownFields, serializers.Serializer):
    file = serializers.FileField(required=False, help_text="the file to import; its extension names the format")
    content = serializers.CharField(required=False, trim_whitespace=False,
                                    help_text="instead of `file`: the file's text (JSON Lines, CSV or Markdown)")
    filename = serializers.CharField(required=False, max_length=300,
                                     help_text="with `content`: its file name, whose extension names the format")
    scopes = serializers.ListField(child=serializers.CharField(max_length=200), required=False, default=list,
                                   help_text="scopes for records that name none (CSV, Markdown); for an export, "
                                             "the only scopes to take from it")
    types = serializers.ListField(child=serializers.ChoiceField(choices=KNOWLEDGE_TYPES), required=False, default=list,
                                  help_text="types of the items made from Markdown (default: definition)")
    passphrase = serializers.CharField(required=False, allow_blank=True, default="", max_length=1000)

    def validate_scopes(self, value):
        return _scopes(value)

    def validate(self, attrs):
        if ("file" in attrs) == ("content" in attrs):
            raise serializers.ValidationError({"file": ["give a file, or its text as `content` with a `filename`"]})
        if "content" in attrs:
            if not attrs.get("filename"):
                raise serializers.ValidationError({"filename": ["name the file `content` holds (its extension "
                                                                "names the format)"]})
            attrs["name"], attrs["file_bytes"] = attrs.pop("filename"), attrs.pop("content").encode()
        else:
            upload = attrs.pop("file")
            if upload.size > settings.KNOWHUB_IMPORT_MAX_BYTES:
                raise serializers.ValidationError({"file": [f"larger than {settings.KNOWHUB_IMPORT_MAX_BYTES:,} bytes"]})
            attrs["name"], attrs["file_bytes"] = upload.name, upload.read()
        if len(attrs["file_bytes"]) > settings.KNOWHUB_IMPORT_MAX_BYTES:
            raise serializers.ValidationError({"content": [f"larger than {settings.KNOWHUB_IMPORT_MAX_BYTES:,} bytes"]})
        return attrs
