"""`manage.py mcp`: the MCP server on stdio, acting as the agent whose token it is given."""
import os

from django.core.management.base import BaseCommand, CommandError

from api import mcp_server
from agents.auth import active_token


class Command(BaseCommand):
    help = ("Run the MCP server on stdin/stdout for one agent (token from --token or KNOWHUB_TOKEN). "
            "Over HTTP it is served by the web process under /mcp.")

    def add_arguments(self, parser):
        parser.add_argument("--token", default=os.environ.get("KNOWHUB_TOKEN"),
                            help="the agent's token (default: $KNOWHUB_TOKEN)")

    def handle(self, *args, token, **options):
        if not token:
            raise CommandError("give the agent's token with --token or KNOWHUB_TOKEN")
        if active_token(token) is None:
            raise CommandError("invalid or revoked token")
        mcp_server.stdio_token = token
        mcp_server.server.run("stdio")  # stdout carries the protocol: nothing else may print there
