from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The top layer: the REST views, the MCP server (`manage.py mcp`) and their URLs."""

    name = "api"
    verbose_name = "Agent API and MCP"
