from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents and API tokens"

    def ready(self):
        from agents import schema  # noqa: F401 - registers the OpenAPI auth extension
