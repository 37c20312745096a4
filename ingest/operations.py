"""The import and export operations (issue 16), declared once for REST, MCP, the client and the audit."""
from agents.caller import Caller
from agents.operations import operation
from django.conf import settings
from ingest import export, importer
from ingest.inputs import ExportInput, ImportInput
from ingest.outputs import ImportOutput


@operation("knowledge_export", input=ExportInput)
def knowledge_export(caller: Caller, *, scopes, passphrase):
    """Everything the caller may read as JSON Lines records (items with versions, feedback, links, vectors;
    resources with versions, secrets still encrypted), for a backup or a move."""
    return export.export_records(caller, scopes=scopes or None, passphrase=passphrase or None,
                                 embedding_model=settings.KNOWHUB_EMBEDDING_MODEL)


@operation("knowledge_import", input=ImportInput, output=ImportOutput, writes=True, permission="curate")
def knowledge_import(caller: Caller, *, name, file_bytes, scopes, types, passphrase) -> dict:
    """Import our JSON Lines export, a CSV or Markdown (curators); a report of what was imported, skipped, failed."""
    report = importer.import_file(caller, name=name, data=file_bytes, scopes=scopes or None, types=types or None,
                                  passphrase=passphrase or None)
    return report.as_dict()
