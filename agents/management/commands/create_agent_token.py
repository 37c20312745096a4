import json

from django.core.management.base import BaseCommand, CommandError

from agents.services import agent_token_create
from core.errors import DomainError


def _scopes(raw: str) -> list[str]:
    return [s.strip() for s in raw.split(",") if s.strip()]


class Command(BaseCommand):
    help = "Create an API token for an agent and print it (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("--agent", required=True, help="agent id, e.g. research_agent")
        parser.add_argument("--scopes", required=True, help="readable scopes, comma-separated: org:acme,user:bob")
        parser.add_argument("--write-scopes", help="writable scopes (default: the readable ones); '' for read-only")
        parser.add_argument("--secrets", action="store_true", help="may reveal resource secrets")
        parser.add_argument("--curate", action="store_true",
                            help="a curator token: edit others' items, restore, archive, unmerge, review merges")
        parser.add_argument("--filters", help="static filter expression as JSON, always applied")
        parser.add_argument("--name", default="")

    def handle(self, *args, agent, scopes, write_scopes, secrets, curate, filters, name, **options):
        try:
            static = json.loads(filters) if filters else None
            token, raw = agent_token_create(
                agent_id=agent, readable_scopes=_scopes(scopes),
                writable_scopes=None if write_scopes is None else _scopes(write_scopes),
                can_read_secrets=secrets, can_curate=curate, static_filters=static, name=name,
            )
        except (json.JSONDecodeError, DomainError) as exc:
            raise CommandError(f"--filters: {exc}") from exc
        self.stdout.write(f"Token for agent:{token.agent_id} (reads {', '.join(token.readable_scopes)}):")
        self.stdout.write(raw)
        self.stdout.write("Shown once. Send it as 'Authorization: Bearer <token>'.")
