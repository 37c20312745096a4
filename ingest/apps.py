from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "ingest"
    verbose_name = "Documents, import and export"

    def ready(self):
        from ingest import operations  # noqa: F401 - declares the document, import and export operations
        from ingest import tasks
        from jobs.kinds import register_job_kind

        register_job_kind("ingest", tasks.run_ingest, readable_subjects=_readable_documents)


def _readable_documents(readable_scopes):
    """The ids (as text) of the documents readable with `readable_scopes`: an ingest job is visible to their readers."""
    from django.db.models import CharField
    from django.db.models.functions import Cast

    from ingest.models import Document

    return Document.objects.readable_with(readable_scopes).annotate(text_id=Cast("id", CharField())).values("text_id")
