"""manage.py export [--scopes S] [--output FILE] [--passphrase-env NAME]: JSON Lines of everything (ingest.export)."""
import json
import os
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.core.serializers.json import DjangoJSONEncoder

from agents.caller import Caller
from core.progress import write_progress
from ingest.export import export_records
from ingest.passphrase import WrongPassphrase


class Command(BaseCommand):
    help = ("Export knowledge (with versions, feedback, merge links, vectors) and resources (with versions, secrets "
            "encrypted) as JSON Lines, to standard output or --output.")

    def add_arguments(self, parser):
        parser.add_argument("--scopes", default="", help="comma-separated: only these scopes (default: every scope)")
        parser.add_argument("--output", help="a file to write (default: standard output)")
        parser.add_argument("--no-vectors", dest="vectors", action="store_false",
                            help="leave the items' vectors out (about an eighth the size; the importing hub embeds again)")
        parser.add_argument("--passphrase-env", metavar="NAME",
                            help="seal the secrets under the passphrase in environment variable NAME, for another "
                                 "installation (never on the command line, where `ps` shows it)")

    def handle(self, *args, scopes, output, passphrase_env, vectors=True, **options):
        passphrase = None
        if passphrase_env:
            passphrase = os.environ.get(passphrase_env)
            if not passphrase:
                raise CommandError(f"--passphrase-env: the environment variable {passphrase_env} is empty or unset")
        # the operator at the server holds the keys anyway: the export reads every scope and every secret
        caller = Caller(principal="command:export", agent_id="export", readable_scopes=None, writable_scopes=(),
                        can_read_secrets=True, read_only=True)
        wanted = [s.strip() for s in scopes.split(",") if s.strip()] or None
        try:
            records = export_records(caller, scopes=wanted, passphrase=passphrase,
                                     embedding_model=settings.KNOWHUB_EMBEDDING_MODEL, vectors=vectors)
            header = next(records)
        except WrongPassphrase as exc:
            raise CommandError(f"--passphrase-env: {exc}") from exc
        total = header["counts"]["resources"] + header["counts"]["knowledge"]
        target = open(output, "w", encoding="utf-8") if output else sys.stdout
        try:
            target.write(json.dumps(header, ensure_ascii=False) + "\n")
            for done, record in enumerate(records, start=1):
                target.write(json.dumps(record, ensure_ascii=False, cls=DjangoJSONEncoder) + "\n")
                if output:
                    write_progress(self.stderr, min(done, total), total)
        finally:
            if output:
                target.close()
        if output:
            self.stderr.write(f"\nExported {header['counts']['knowledge']} items and {header['counts']['resources']} "
                              f"resources to {output} (secrets: {header['secrets']['mode']})")
