from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "ingest"
    verbose_name = "Ingest, import and export"

    def ready(self):
        from ingest import operations  # noqa: F401 - declares the import and export operations
