"""Document ingestion: a file or a URL becomes knowledge items through a job with visible progress.

`document_ingest` (the request) checks what can be checked at once (write access, the file's type and size,
the URL's scheme and address), stores a `Document` and queues an "ingest" job; the same file read into the
same scopes again answers with the earlier document and does nothing. `document_run` (the worker) fetches
a URL, extracts the text, chunks it and keeps the items in step with the chunks (`ingest.chunks`), writing
the stage and counts to the document and its job as it goes; a failure marks both failed with the reason.
It writes as the requester, with the rights the request had to change others' items (recorded in the job):
reading again a document whose items are another's needs a curator, as editing them through the API does.
"""
import dataclasses

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from agents.caller import Caller
from agents.requesters import requester_writing
from core.errors import DomainError
from ingest import chunking, extract
from ingest.chunks import apply_chunks, lock_document, sha256
from ingest.fetch import FetchRefused, check_url, fetch
from ingest.models import Document
from jobs.models import Job
from jobs.services import job_claim, job_create, job_fail, job_holds_claim, job_progress, job_succeed

DEFAULT_TYPES = ["definition"]


class DocumentRefused(DomainError):
    """A document that cannot be ingested (type, size, URL): a 4xx naming the field."""

    def __init__(self, message: str, *, field: str, status: int = 400):
        super().__init__(message, field=field)
        self.status = status
        self.code = "too_large" if status == 413 else "invalid"


def document_ingest(caller: Caller, *, scopes=None, types=None, name: str | None = None, data: bytes | None = None,
                    content_type: str | None = None, url: str | None = None, chunk_size: int = chunking.DEFAULT_SIZE,
                    chunk_overlap: int = chunking.DEFAULT_OVERLAP) -> tuple[Document, bool]:
    """Queue the ingestion of a file (`name`, `data`) or a `url` as `caller`; (the document, whether it is new).

    Raises DocumentRefused for an unknown type, a file over KNOWHUB_DOCUMENT_MAX_BYTES or a URL that may not be
    fetched, PermissionDenied for scopes the caller may not write."""
    scopes = sorted(set(caller.scopes_to_write(scopes)))  # one document in ["a", "b"] and ["b", "a"]
    types = list(types or DEFAULT_TYPES)
    try:
        chunking.check_sizes(chunk_size, chunk_overlap)
    except ValueError as exc:
        raise DocumentRefused(str(exc), field="chunk_size" if str(exc).startswith("size") else "chunk_overlap") from None
    fields = {"scopes": scopes, "types": types, "chunk_size": chunk_size, "chunk_overlap": chunk_overlap,
              "requested_by": caller.principal}
    if url is not None:
        try:
            uri = check_url(url, allow=settings.KNOWHUB_FETCH_ALLOW)
        except FetchRefused as exc:
            raise DocumentRefused(str(exc), field="url") from None
        document = Document(origin=Document.Origin.URL, uri=uri, **fields)
    else:
        try:
            kind = extract.kind_of(name, content_type)
        except extract.UnsupportedDocument as exc:
            raise DocumentRefused(str(exc), field="file", status=415) from None
        if len(data) > settings.KNOWHUB_DOCUMENT_MAX_BYTES:
            raise DocumentRefused(_("%(name)s is larger than %(limit)s bytes") % {"name": name, "limit": f"{settings.KNOWHUB_DOCUMENT_MAX_BYTES:,}"}, field="file",
                                  status=413)
        document = Document(origin=Document.Origin.UPLOAD, uri=name, kind=kind, content_hash=sha256(data),
                            size=len(data), data=data, **fields)
    with transaction.atomic():
        if document.origin == Document.Origin.UPLOAD:
            lock_document("upload", document.uri, scopes)  # two uploads of one file at once: the later finds the earlier
            latest = _latest_reading(document)
            if latest is not None:
                return latest, False
        document.save()
        job = job_create(kind="ingest", subject=str(document.id), requested_by=caller.principal,
                         params={"document": str(document.id), "edits_any": caller.edits_any,
                                 "token_id": caller.token_id})
        Document.objects.filter(pk=document.pk).update(job=job.id)
        document.job = job.id
    return document, True


def _latest_reading(document: Document) -> Document | None:
    """The latest reading of this file into these scopes when it read the same bytes the same way (reading them
    again would change nothing); an older reading of the same bytes does not count: a version in between may have
    replaced them."""
    latest = (Document.objects.filter(uri=document.uri, kind=document.kind, scopes=document.scopes)
              .exclude(status=Document.Status.FAILED).order_by("-created_at").first())
    same = latest is not None and (latest.content_hash, list(latest.types), latest.chunk_size, latest.chunk_overlap) \
        == (document.content_hash, list(document.types), document.chunk_size, document.chunk_overlap)
    return latest if same else None


def _stage(document: Document, attempt: int, **progress) -> None:
    document.progress = {**document.progress, **progress}
    Document.objects.filter(pk=document.pk).update(progress=document.progress)
    job_progress(job_id=document.job, progress=document.progress, attempt=attempt)


INGEST_ERRORS = (FetchRefused, extract.UnsupportedDocument, extract.ExtractionError, DomainError, ValueError)


def document_run(*, job_id: str, worker: str = "", task_id: str = "") -> None:
    """Read the job's document into items (the worker). Safe to run again: an unchanged document writes nothing,
    and of two runs of one job only the latest claim stores anything."""
    attempt = job_claim(job_id=job_id, worker=worker, task_id=task_id)
    if not attempt:
        return
    job = Job.objects.only("subject", "params").get(pk=job_id)
    document = Document.objects.get(pk=job.subject)
    Document.objects.filter(pk=document.pk).update(status=Document.Status.PROCESSING, error="")
    try:
        writer = document_writer(document, job.params)  # before fetching: a revoked token's URL is not fetched
        prepared = _prepare(document, attempt)  # each stage visible as it starts
        with transaction.atomic():  # then the items, the document and the job together, for the latest claim only
            if not job_holds_claim(job_id, attempt):
                return
            outcome = _store(document, prepared, writer=writer)
            Document.objects.filter(pk=document.pk).update(
                status=Document.Status.DONE, finished_at=timezone.now(), items=outcome.item_ids,
                outcome={"created": outcome.created, "updated": outcome.updated, "kept": outcome.kept,
                         "archived": outcome.archived, "unchanged": outcome.unchanged_document})
            job_succeed(job_id=job_id, attempt=attempt, result={
                "document_id": str(document.id), "created": len(outcome.created), "updated": len(outcome.updated),
                "kept": len(outcome.kept), "archived": len(outcome.archived), "unchanged": outcome.unchanged_document})
    except INGEST_ERRORS as exc:
        reason = exc.api_message() if isinstance(exc, DomainError) else str(exc)
        with transaction.atomic():
            if not job_holds_claim(job_id, attempt):
                return
            Document.objects.filter(pk=document.pk).update(status=Document.Status.FAILED, error=reason[:2000],
                                                           finished_at=timezone.now())
            job_fail(job_id=job_id, error=reason, attempt=attempt)


def _prepare(document: Document, attempt: int) -> dict:
    """Fetch (a URL), extract and chunk the document, writing each stage as it starts."""
    data, kind, name = bytes(document.data), document.kind, document.uri
    if document.origin == Document.Origin.URL:
        _stage(document, attempt, stage="fetching")
        fetched = fetch(document.uri, max_bytes=settings.KNOWHUB_DOCUMENT_MAX_BYTES,
                        timeout=settings.KNOWHUB_FETCH_TIMEOUT_SECONDS, allow=settings.KNOWHUB_FETCH_ALLOW)
        data, kind, name = fetched.data, extract.kind_of(fetched.filename, fetched.content_type), fetched.filename
        Document.objects.filter(pk=document.pk).update(kind=kind, content_hash=sha256(data), size=len(data))
    _stage(document, attempt, stage="extracting", bytes=len(data))
    extracted = extract.extract(data, kind)
    title = extracted.title or name
    Document.objects.filter(pk=document.pk).update(title=title[:500])
    _stage(document, attempt, stage="chunking")
    pieces = chunking.chunk(extracted, size=document.chunk_size, overlap=document.chunk_overlap, fallback_title=title,
                            max_chunks=settings.KNOWHUB_DOCUMENT_MAX_ITEMS)
    _stage(document, attempt, stage="storing", chunks=len(pieces))  # then one transaction: all the chunks or none
    return {"kind": kind, "content_hash": sha256(data), "title": title, "pieces": pieces}


def document_writer(document: Document, params: dict) -> Caller:
    """Who the worker writes the document's items as: its requester, who may change another's items (read the
    document again after someone else) only when the request's caller could edit any item (a curator); a job
    queued before this was recorded may not.

    Raises RequesterGone when the requester may no longer write the document's scopes (`requester_writing`: its
    token revoked or narrowed, its account disabled or read-only since the request)."""
    now = requester_writing(document.requested_by, params.get("token_id"), document.scopes, every=True)
    return dataclasses.replace(Caller.system(document.requested_by),
                               edits_any=bool(params.get("edits_any")) and now.edits_any)


def _store(document: Document, prepared: dict, *, writer: Caller):
    return apply_chunks(
        writer, kind=prepared["kind"], uri=document.uri,
        content_hash=prepared["content_hash"], chunks=prepared["pieces"], scopes=list(document.scopes),
        types=list(document.types), source_name=prepared["title"],
        extra={"document_id": str(document.id), "origin": document.origin, "chunk_size": document.chunk_size,
               "chunk_overlap": document.chunk_overlap})
