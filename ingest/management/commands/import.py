"""manage.py import PATH [--scopes S] [--types T] [--passphrase-env NAME]: JSON Lines, CSV or Markdown (ingest.importer)."""
import json
import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from agents.caller import Caller
from core.errors import DomainError
from core.progress import write_progress
from ingest.importer import import_path
from ingest.passphrase import WrongPassphrase


class Command(BaseCommand):
    help = ("Import a KnowHub export (.jsonl), a CSV (one item per row) or Markdown (a .md file, a folder of them, or "
            "a .zip); the format comes from the extension. Re-running it changes nothing.")

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--scopes", default="", help="comma-separated scopes for records that name none (CSV rows, "
                                                         "Markdown); for an export, the only scopes to take from it")
        parser.add_argument("--types", default="", help="types of the items made from Markdown (default: definition)")
        parser.add_argument("--passphrase-env", metavar="NAME",
                            help="the export's passphrase is in environment variable NAME")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args, path, scopes, types, passphrase_env, json: bool = False, **options):
        source = Path(path)
        if not source.exists():
            raise CommandError(f"{path}: no such file or folder")
        passphrase = os.environ.get(passphrase_env) if passphrase_env else None
        caller = Caller.system("command:import")

        def progress(done, total):
            write_progress(self.stderr, done, total)

        try:
            report = import_path(caller, source, scopes=_list(scopes), types=_list(types), passphrase=passphrase,
                                 progress=progress)
        except (DomainError, WrongPassphrase) as exc:
            raise CommandError(f"{getattr(exc, 'field', None) or 'file'}: {exc}") from exc
        self.stderr.write("")
        summary = report.as_dict()
        if json:
            self.stdout.write(_json(summary))
            return
        self.stdout.write(f"{summary['format']}: imported {report.imported}, updated {report.updated}, "
                          f"skipped {report.skipped} (unchanged), failed {len(report.failed)}")
        for failure in report.failed:
            self.stdout.write(f"  line {failure['line']}: {failure['reason']}")


def _list(value: str) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] or None


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)
