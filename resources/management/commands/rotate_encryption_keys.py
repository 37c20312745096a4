"""Re-encrypt every secret under the newest key (the first of KNOWHUB_ENCRYPTION_KEYS).

Resumable: rows already under the newest key are skipped, and each batch
commits, so an interrupted run continues where it stopped. Each row is
rewritten only if it still holds the token that was read (compare-and-set),
so a concurrent edit is never overwritten.
"""
from cryptography.fernet import Fernet, InvalidToken
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from core.progress import write_progress
from resources import crypto

BATCH = 200


class Command(BaseCommand):
    help = "Re-encrypt every resource secret under the newest encryption key."

    def handle(self, *args, **options):
        keys = crypto.configured_keys()
        newest, everything = Fernet(keys[0].encode()), crypto.fernet()
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM resources_resource WHERE secure_body <> ''")
            (total,) = cursor.fetchone()
        if not total:
            self.stdout.write("No secrets stored: nothing to rotate.")
            return
        done = rotated = 0
        last_id = ""
        while True:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    "SELECT id, secure_body FROM resources_resource WHERE secure_body <> '' AND id > %s ORDER BY id LIMIT %s",
                    [last_id, BATCH],
                )
                rows = cursor.fetchall()
                if not rows:
                    break
                for resource_id, token in rows:
                    try:
                        newest.decrypt(token.encode())
                    except InvalidToken:
                        try:
                            fresh = everything.rotate(token.encode()).decode()
                        except InvalidToken as exc:
                            raise CommandError(f"{resource_id}: no configured key decrypts this secret") from exc
                        cursor.execute("UPDATE resources_resource SET secure_body = %s WHERE id = %s AND secure_body = %s",
                                       [fresh, resource_id, token])
                        rotated += cursor.rowcount
                    done += 1
                last_id = rows[-1][0]
            write_progress(self.stdout, done, total)
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS(f"{rotated} of {done} secrets re-encrypted under the newest key."))
