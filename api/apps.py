from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ApiConfig(AppConfig):
    """The top layer: the REST views, the MCP server (`manage.py mcp`) and their URLs."""

    name = "api"
    verbose_name = _("Agent API and MCP")
