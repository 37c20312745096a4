"""The bodies of the document, import and export operations."""
import base64
import binascii

from django.conf import settings
from django.utils.translation import gettext as _
from rest_framework import serializers

from core.fields import (SCOPES_MAX, NoUnknownFields, StrictBooleanField, StrictCharField, StrictIntegerField,
                         valid_scopes)
from ingest.chunking import DEFAULT_OVERLAP, DEFAULT_SIZE, MIN_SIZE
from knowledge.models import KNOWLEDGE_TYPES


class ExportInput(NoUnknownFields, serializers.Serializer):
    scopes = serializers.ListField(child=serializers.CharField(max_length=200), required=False, default=list,
                                   max_length=SCOPES_MAX,
                                   help_text="only items and resources in these scopes (default: all you can read)")
    passphrase = serializers.CharField(required=False, allow_blank=True, default="", max_length=1000,
                                       help_text="seal the secrets under this passphrase, for another installation")
    vectors = StrictBooleanField(default=True, help_text="the items' vectors too (false: about an eighth the size; "
                                                         "the importing hub embeds the items again)")

    def validate_scopes(self, value):
        return valid_scopes(value)


class ImportInput(NoUnknownFields, serializers.Serializer):
    file = serializers.FileField(required=False, help_text="the file to import; its extension names the format")
    content = StrictCharField(required=False, trim_whitespace=False,
                              help_text="instead of `file`: the file's text (JSON Lines, CSV or Markdown)")
    filename = StrictCharField(required=False, max_length=300,
                               help_text="with `content`: its file name, whose extension names the format")
    scopes = serializers.ListField(child=StrictCharField(max_length=200), required=False, default=list,
                                   max_length=SCOPES_MAX,
                                   help_text="scopes for records that name none (CSV, Markdown); for an export, "
                                             "the only scopes to take from it")
    types = serializers.ListField(child=serializers.ChoiceField(choices=KNOWLEDGE_TYPES), required=False, default=list,
                                  max_length=len(KNOWLEDGE_TYPES),
                                  help_text="types of the items made from Markdown (default: definition)")
    passphrase = StrictCharField(required=False, allow_blank=True, default="", max_length=1000)

    def validate_scopes(self, value):
        return valid_scopes(value)

    def validate(self, attrs):
        if ("file" in attrs) == ("content" in attrs):
            raise serializers.ValidationError({"file": [_("give a file, or its text as `content` with a `filename`")]})
        if "content" in attrs:
            if not attrs.get("filename"):
                raise serializers.ValidationError({"filename": [_("name the file `content` holds (its extension "
                                                                  "names the format)")]})
            attrs["name"], attrs["file_bytes"] = attrs.pop("filename"), attrs.pop("content").encode()
            attrs["given_as"] = "content"
        else:
            upload = attrs.pop("file")
            # at most one byte past the limit: the operation refuses a larger file with a 413 naming the limit and
            # the command that has none (ingest.imports.import_request), as a document's, not with this 400
            attrs["name"], attrs["file_bytes"] = upload.name, upload.read(settings.KNOWHUB_IMPORT_MAX_BYTES + 1)
            attrs["given_as"] = "file"
        return attrs


class DocumentIngestInput(NoUnknownFields, serializers.Serializer):
    """POST /api/documents: a file (multipart), a `url`, or (MCP) a file's `content` with its `filename`."""

    file = serializers.FileField(required=False, help_text="Markdown, plain text, HTML, PDF or DOCX")
    url = StrictCharField(required=False, max_length=2000, help_text="an http(s) page or file to fetch")
    content = StrictCharField(required=False, trim_whitespace=False,
                              help_text="instead of `file`: the text of a Markdown, text or HTML file")
    content_base64 = StrictCharField(required=False, help_text="instead of `file`: any file's bytes, base64")
    filename = StrictCharField(required=False, max_length=300,
                               help_text="with `content` or `content_base64`: the file's name (its extension "
                                         "names the type)")
    scopes = serializers.ListField(child=StrictCharField(max_length=200), required=False, default=list,
                                   max_length=SCOPES_MAX,
                                   help_text="the scopes of the items (default: the token's first writable scope)")
    types = serializers.ListField(child=serializers.ChoiceField(choices=KNOWLEDGE_TYPES), required=False, default=list,
                                  max_length=len(KNOWLEDGE_TYPES),
                                  help_text="the items' types (default: definition)")
    chunk_size = StrictIntegerField(required=False, min_value=MIN_SIZE, max_value=20_000, default=DEFAULT_SIZE,
                                    help_text="the most characters of one item (chunks break between paragraphs)")
    chunk_overlap = StrictIntegerField(required=False, min_value=0, max_value=10_000, default=DEFAULT_OVERLAP,
                                       help_text="characters of the previous chunk repeated at the start of the "
                                                 "next, within a section")

    def validate_scopes(self, value):
        return valid_scopes(value)

    def validate(self, attrs):
        given = [name for name in ("file", "url", "content", "content_base64") if name in attrs]
        if len(given) != 1:
            raise serializers.ValidationError({"file": [_("give one of `file`, `url`, `content` or `content_base64`")]})
        if attrs["chunk_overlap"] >= attrs["chunk_size"] // 2:
            raise serializers.ValidationError({"chunk_overlap": [_("must be less than half of chunk_size")]})
        if "filename" in attrs and ("url" in attrs or "file" in attrs):
            # a file names itself and a URL's type comes from its reply: a `filename` beside them has nothing to name
            raise serializers.ValidationError({"filename": [_("goes only with `content` or `content_base64`")]})
        if "url" in attrs:
            return attrs
        if "file" in attrs:
            upload = attrs.pop("file")
            # at most one byte past the limit: the operation refuses a larger file with a 413 naming it
            # (ingest.documents.document_ingest), as it refuses a `content` that large, not with this 400
            attrs["name"], attrs["file_bytes"] = upload.name, upload.read(settings.KNOWHUB_DOCUMENT_MAX_BYTES + 1)
            attrs["content_type"] = getattr(upload, "content_type", None)
            return attrs
        if not attrs.get("filename"):
            raise serializers.ValidationError({"filename": [_("name the file (its extension names the type)")]})
        name = attrs.pop("filename")
        if "content" in attrs:
            attrs["name"], attrs["file_bytes"] = name, attrs.pop("content").encode()
        else:
            try:
                attrs["name"], attrs["file_bytes"] = name, base64.b64decode(attrs.pop("content_base64"), validate=True)
            except (binascii.Error, ValueError):
                raise serializers.ValidationError({"content_base64": [_("not valid base64")]}) from None
        return attrs


OFFSET_MAX = 1_000_000  # the documents list's furthest offset (the UI's pages stop there too)


class DocumentListInput(NoUnknownFields, serializers.Serializer):
    status = serializers.ChoiceField(choices=["queued", "processing", "done", "failed"], required=False)
    limit = serializers.IntegerField(min_value=1, max_value=100, default=20)
    offset = serializers.IntegerField(min_value=0, max_value=OFFSET_MAX, default=0)  # past it: a 400 naming offset
