"""`manage.py translations`: the Chinese catalogue brought up to date with the code, then compiled.

Extracts every marked string from the project's Python and templates into
locale/zh_Hans/LC_MESSAGES/django.po (existing translations are kept; new strings arrive with an
empty msgstr and old ones are dropped), then compiles django.mo. Translate the new entries in the
.po and run it again; tests/i18n fails while any msgid lacks a translation or the .mo is stale.
Needs GNU gettext (`apt-get install gettext`).
"""
from django.core.management import call_command
from django.core.management.base import BaseCommand

LOCALES = ["zh_Hans"]
# Not ours or not shown to people: the virtualenv, data, tests, benchmarks, the agent client, vendor templates.
IGNORED = [".venv", "var", "tests", "bench", "clients", "docs", "examples", "static", "templates/drf_spectacular"]


class Command(BaseCommand):
    help = "Update locale/*/django.po from the code and templates, then compile the .mo files."

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true", help="only compile (no extraction)")

    def handle(self, *args, check=False, **options):
        if not check:
            call_command("makemessages", locale=LOCALES, ignore_patterns=IGNORED, no_obsolete=True,
                         add_location="file", verbosity=options["verbosity"])
        call_command("compilemessages", locale=LOCALES, ignore_patterns=IGNORED, verbosity=options["verbosity"])
