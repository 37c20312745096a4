"""The document, import and export operations (issue 16), declared once for REST, MCP, the client and the audit."""
import uuid

from django.conf import settings
from django.http import Http404

from agents.caller import Caller
from agents.operations import operation
from ingest import documents, export, imports
from ingest.inputs import DocumentIngestInput, DocumentListInput, ExportInput, ImportInput
from ingest.models import Document
from ingest.outputs import DocumentListOutput, DocumentOutput, ImportJobOutput


@operation("knowledge_export", input=ExportInput)
def knowledge_export(caller: Caller, *, scopes, passphrase, vectors=True):
    """Everything the caller may read as JSON Lines records (items with versions, feedback, links, vectors unless
    `vectors` is false; resources with versions, secrets still encrypted), for a backup or a move."""
    return export.export_records(caller, scopes=scopes or None, passphrase=passphrase or None,
                                 embedding_model=settings.KNOWHUB_EMBEDDING_MODEL, vectors=vectors)


@operation("knowledge_import", input=ImportInput, output=ImportJobOutput, writes=True, permission="curate",
           status=202)
def knowledge_import(caller: Caller, *, name, file_bytes, scopes, types, passphrase, given_as="file") -> dict:
    """Import our JSON Lines export, a CSV or Markdown (curators), by a job (202 with the job): its progress counts
    the records read, its result is the report of what was imported, updated, skipped and failed (line, reason)."""
    job = imports.import_request(caller, name=name, data=file_bytes, scopes=scopes or None, types=types or None,
                                 passphrase=passphrase or None, field=given_as)
    return {"job": {"id": str(job.id), "status": job.status, "url": f"/api/jobs/{job.id}"}}


@operation("document_ingest", input=DocumentIngestInput, output=DocumentOutput, writes=True, permission="write",
           status=202)
def document_ingest(caller: Caller, *, scopes, types, chunk_size, chunk_overlap, url=None, name=None,
                    file_bytes=None, content_type=None) -> Document:
    """Read a file (Markdown, text, HTML, PDF, DOCX) or a URL into knowledge items, by a job (202 with the document)."""
    document, new = documents.document_ingest(
        caller, scopes=scopes or None, types=types or None, url=url, name=name, data=file_bytes,
        content_type=content_type, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    document.repeated = not new
    return document


@operation("document_list", input=DocumentListInput, output=DocumentListOutput)
def document_list(caller: Caller, *, status=None, limit, offset) -> dict:
    """The documents the caller may read, newest first, with their status and progress."""
    found = Document.objects.visible_to(caller).defer("data")
    if status:
        found = found.filter(status=status)
    count = found.count()
    return {"results": list(found[offset:offset + limit]), "count": count,
            "next_offset": offset + limit if offset + limit < count else None}


@operation("document_get", output=DocumentOutput)
def document_get(caller: Caller, *, document_id) -> Document:
    """One document: its status, progress, error and the items it became; 404 unless visible."""
    try:
        document_id = uuid.UUID(str(document_id))
    except ValueError:
        raise Http404 from None
    document = Document.objects.visible_to(caller).defer("data").filter(pk=document_id).first()
    if document is None:
        raise Http404
    return document
