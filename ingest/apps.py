from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class IngestConfig(AppConfig):
    name = "ingest"
    verbose_name = _("Documents, import and export")

    def ready(self):
        from ingest import operations  # noqa: F401 - declares the document, import and export operations
        from ingest import tasks
        from jobs.kinds import register_job_kind

        register_job_kind("ingest", tasks.run_ingest, readable_subjects=_readable_documents)
        # an import is about no one subject: visible to whoever asked while it may read every scope the import
        # could write (the requester's writable scopes; a person's, every scope: people with a role read all jobs)
        register_job_kind("import", tasks.run_import, scopes_param="writable_scopes")


def _readable_documents(readable_scopes):
    """The ids (as text) of the documents readable with `readable_scopes`: an ingest job is visible to their readers."""
    from django.db.models import CharField
    from django.db.models.functions import Cast

    from ingest.models import Document

    return Document.objects.readable_with(readable_scopes).annotate(text_id=Cast("id", CharField())).values("text_id")
