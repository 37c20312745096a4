from django.apps import AppConfig


class ResourcesConfig(AppConfig):
    name = "resources"
    verbose_name = "Resources"

    def ready(self):
        from agents.builtin_filters import register_input
        from resources.api import ResourceInput

        register_input("resource_save", ResourceInput)
