"""What the import operation answers."""
from rest_framework import serializers


class ImportFailure(serializers.Serializer):
    line = serializers.JSONField(help_text="the line (JSON Lines, CSV) or file (Markdown) of the record")
    reason = serializers.CharField()


class ImportOutput(serializers.Serializer):
    format = serializers.CharField()
    imported = serializers.IntegerField()
    updated = serializers.IntegerField()
    skipped = serializers.IntegerField(help_text="unchanged since an earlier import")
    failed = ImportFailure(many=True)
    knowledge_ids = serializers.ListField(child=serializers.CharField())


class DocumentJob(serializers.Serializer):
    """The document's job, from its id: `{"id", "url"}`."""

    id = serializers.UUIDField()
    url = serializers.CharField()

    def to_representation(self, job_id):
        return {"id": str(job_id), "url": f"/api/jobs/{job_id}"}


class DocumentOutput(serializers.Serializer):
    id = serializers.UUIDField()
    origin = serializers.CharField(help_text="upload or url")
    uri = serializers.CharField(help_text="the file name, or the URL")
    kind = serializers.CharField(help_text="markdown, text, html, pdf or docx (a URL's once fetched)")
    title = serializers.CharField()
    status = serializers.CharField(help_text="queued, processing, done or failed")
    error = serializers.CharField(help_text="why it failed")
    progress = serializers.DictField(help_text="the stage (fetching, extracting, chunking, storing) and counts")
    items = serializers.ListField(child=serializers.CharField(), help_text="the knowledge items it became, in order")
    outcome = serializers.DictField(help_text="created, updated, kept and archived item ids; unchanged")
    scopes = serializers.ListField(child=serializers.CharField())
    types = serializers.ListField(child=serializers.CharField())
    chunk_size = serializers.IntegerField()
    chunk_overlap = serializers.IntegerField()
    size = serializers.IntegerField(help_text="bytes")
    content_hash = serializers.CharField(help_text="SHA-256 of the bytes read")
    job = DocumentJob(allow_null=True)
    requested_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    repeated = serializers.SerializerMethodField(help_text="true when the same file was read into the same scopes "
                                                           "before: nothing was queued")

    def get_repeated(self, document) -> bool:
        return bool(getattr(document, "repeated", False))


class DocumentListOutput(serializers.Serializer):
    results = DocumentOutput(many=True)
    count = serializers.IntegerField(help_text="documents matching, all pages")
    next_offset = serializers.IntegerField(allow_null=True)
