"""What the document and import operations answer."""
from rest_framework import serializers


class ImportFailure(serializers.Serializer):
    line = serializers.JSONField(help_text="the line (JSON Lines, CSV) or file (Markdown) of the record")
    reason = serializers.CharField()


class ImportOutput(serializers.Serializer):
    """An import's report: the result of its job (GET /api/jobs/{id} once it succeeded)."""

    format = serializers.CharField()
    imported = serializers.IntegerField()
    updated = serializers.IntegerField()
    skipped = serializers.IntegerField(help_text="unchanged since an earlier import")
    failed = ImportFailure(many=True)
    knowledge_ids = serializers.ListField(child=serializers.CharField())


class ImportJob(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.CharField(help_text="queued: poll `url` (job_get) for its progress, then its result")
    url = serializers.CharField()


class ImportJobOutput(serializers.Serializer):
    """POST /api/import: 202 with the import's job; its `result` is the report (`ImportOutput`) once it succeeded."""

    job = ImportJob()


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


LISTED_ITEMS = 5  # a listed document's first item ids; the rest are in the document (GET /api/documents/{id})


class DocumentSummaryOutput(DocumentOutput):
    """A document in the list: counts instead of id arrays, which grow with the document (one of 40,000 chunks
    made a page of 20 documents 2.3 MB); its detail (`DocumentOutput`) carries the arrays."""

    items = serializers.SerializerMethodField(help_text=f"the first {LISTED_ITEMS} items it became, in order")
    items_count = serializers.SerializerMethodField(help_text="how many items it became")
    items_more = serializers.SerializerMethodField(help_text="how many of them `items` leaves out (see the document)")
    outcome = serializers.SerializerMethodField(help_text="how many items were created, updated, kept and archived; "
                                                          "unchanged")

    def get_items(self, document) -> list[str]:
        return list(document.items[:LISTED_ITEMS])

    def get_items_count(self, document) -> int:
        return len(document.items)

    def get_items_more(self, document) -> int:
        return max(len(document.items) - LISTED_ITEMS, 0)

    def get_outcome(self, document) -> dict:
        outcome = document.outcome or {}
        counts = {key: len(outcome[key]) for key in ("created", "updated", "kept", "archived") if key in outcome}
        return {**counts, "unchanged": outcome["unchanged"]} if "unchanged" in outcome else counts


class DocumentListOutput(serializers.Serializer):
    results = DocumentSummaryOutput(many=True)
    count = serializers.IntegerField(help_text="documents matching, all pages")
    next_offset = serializers.IntegerField(allow_null=True)
