from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = _("Jobs and workers")

    def ready(self):
        from jobs import operations  # noqa: F401 - declares the job operations
