"""A document being read into knowledge: what it is, who asked, how far it got and the items it became."""
import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from agents.visibility import ScopedQuerySet


class Document(models.Model):
    """An uploaded file or a URL, ingested by a job into knowledge items (ingest.documents).

    Visible to whoever may read one of its scopes, the scopes its items are saved in. The bytes stay
    (bounded by KNOWHUB_DOCUMENT_MAX_BYTES) so that a failed document can be run again as it was.
    """

    objects = ScopedQuerySet.as_manager()

    class Status(models.TextChoices):
        QUEUED = "queued"
        PROCESSING = "processing"
        DONE = "done"
        FAILED = "failed"

    class Origin(models.TextChoices):
        UPLOAD = "upload"
        URL = "url"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    origin = models.CharField(max_length=10, choices=Origin.choices)
    uri = models.CharField(max_length=2000, help_text="the file name, or the URL asked for")
    kind = models.CharField(max_length=10, blank=True, default="", help_text="markdown, text, html, pdf or docx")
    title = models.CharField(max_length=500, blank=True, default="")
    content_hash = models.CharField(max_length=64, blank=True, default="", db_index=True)
    size = models.PositiveIntegerField(default=0)
    data = models.BinaryField(blank=True, default=b"", editable=False)
    scopes = ArrayField(models.CharField(max_length=200))
    types = ArrayField(models.CharField(max_length=20))
    chunk_size = models.PositiveIntegerField()
    chunk_overlap = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True, default="")
    progress = models.JSONField(default=dict, blank=True)
    items = ArrayField(models.CharField(max_length=40), default=list, blank=True)
    outcome = models.JSONField(default=dict, blank=True, help_text="created, updated, kept and archived item ids")
    job = models.UUIDField(null=True, blank=True, help_text="the ingest job that reads it (jobs.Job)")
    requested_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["uri", "-created_at"], name="document_uri_created")]

    def __str__(self) -> str:
        return f"{self.uri} ({self.status})"


class ImportUpload(models.Model):
    """A file waiting for its import job (ingest.imports): its bytes, the import's options and the rights of the
    request that asked, deleted (bytes and passphrase) when the job ends, succeeded or failed. An export's
    passphrase is kept only as a Fernet token under the installation's key (resources.crypto), never as typed."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=300, help_text="the file's name; its extension names the format")
    data = models.BinaryField(editable=False)
    scopes = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    types = ArrayField(models.CharField(max_length=20), default=list, blank=True)
    passphrase = models.TextField(blank=True, default="", help_text="encrypted with the installation's key")
    caller = models.JSONField(help_text="the rights of the request's caller, which the worker imports with")
    requested_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.name} ({self.requested_by})"
