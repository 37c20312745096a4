from django.apps import AppConfig


class ResourcesConfig(AppConfig):
    name = "resources"
    verbose_name = "Resources"

    def ready(self):
        from resources import operations  # noqa: F401 - declares the resource operations
