from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs and workers"

    def ready(self):
        from jobs import operations  # noqa: F401 - declares the job operations
