from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ResourcesConfig(AppConfig):
    name = "resources"
    verbose_name = _("Resources")

    def ready(self):
        from resources import operations  # noqa: F401 - declares the resource operations
