"""Make sure a curator account exists, and say how to log in."""
import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the curator superuser if missing (random password, printed once)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default=os.environ.get("KNOWHUB_CURATOR_USERNAME", "curator"))

    def handle(self, *args, username, **options):
        User = get_user_model()
        if User.objects.filter(username=username).exists():
            self.stdout.write(
                f"Curator account '{username}' exists. Forgot the password? "
                f"Run: .venv/bin/python manage.py changepassword {username}"
            )
            return
        password = os.environ.get("KNOWHUB_CURATOR_PASSWORD") or secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        shown = "(from KNOWHUB_CURATOR_PASSWORD)" if os.environ.get("KNOWHUB_CURATOR_PASSWORD") else password
        self.stdout.write(self.style.SUCCESS(f"Created curator account '{username}' with password: {shown}"))
        self.stdout.write("This password is shown only once; change it with manage.py changepassword.")
