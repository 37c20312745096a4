from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = _("Agents and API tokens")

    def ready(self):
        from agents import builtin_filters, schema  # noqa: F401 - register the audit filter and the OpenAPI auth extension
