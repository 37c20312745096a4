"""Re-encrypt every secret under the newest key (the first of KNOWHUB_ENCRYPTION_KEYS).

Every column of an `EncryptedTextField` in any installed model is rotated
(`encrypted_columns()` finds them, so a new encrypted field is covered without
touching this command): today a resource's secret, each earlier version's
secret and each webhook subscription's signing secret. Dropping the old key is
safe only once every one of them is done.

Resumable: rows already under the newest key are left alone, and each batch
commits in its own transaction, so an interrupted run continues where it
stopped. Each row is rewritten only if it still holds the token that was read
(compare-and-set), so a concurrent edit is never overwritten.
"""
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken
from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from core.progress import write_progress
from resources import crypto
from resources.fields import EncryptedTextField

BATCH = 200


@dataclass(frozen=True)
class EncryptedColumn:
    model: type
    field: EncryptedTextField

    @property
    def table(self) -> str:
        return self.model._meta.db_table

    @property
    def column(self) -> str:
        return self.field.column

    @property
    def pk_column(self) -> str:
        return self.model._meta.pk.column

    @property
    def label(self) -> str:
        return f"{self.table}.{self.column}"


def encrypted_columns() -> list[EncryptedColumn]:
    """Every database column holding an `EncryptedTextField`, once each (a proxy or a child model
    does not repeat its parent's table), in a stable order."""
    found = []
    for model in apps.get_models():
        meta = model._meta
        if meta.proxy or meta.swapped:
            continue
        found += [EncryptedColumn(model, field) for field in meta.local_concrete_fields
                  if isinstance(field, EncryptedTextField)]
    return sorted(found, key=lambda c: c.label)


class Command(BaseCommand):
    help = ("Re-encrypt every encrypted secret (resources, their earlier versions, webhook subscriptions, "
            "any EncryptedTextField) under the newest encryption key.")

    def handle(self, *args, **options):
        keys = crypto.configured_keys()
        newest, everything = Fernet(keys[0].encode()), crypto.fernet()
        columns = encrypted_columns()
        totals = {c: self._count(c) for c in columns}
        if not sum(totals.values()):
            self.stdout.write("No secrets stored: nothing to rotate.")
            return
        all_done = all_rotated = 0
        report = []
        for c in columns:
            done, rotated = self._rotate(c, totals[c], newest, everything)
            all_done, all_rotated = all_done + done, all_rotated + rotated
            report.append(f"{c.label}: {rotated} of {done} re-encrypted")
        for line in report:
            self.stdout.write(line)
        self.stdout.write(self.style.SUCCESS(f"{all_rotated} of {all_done} secrets re-encrypted under the newest key."))

    @staticmethod
    def _count(c: EncryptedColumn) -> int:
        q = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {q(c.table)} WHERE {q(c.column)} <> ''")
            return cursor.fetchone()[0]

    def _rotate(self, c: EncryptedColumn, total: int, newest: Fernet, everything) -> tuple[int, int]:
        """One column, in primary-key order, a transaction per batch. Returns (rows seen, rows rewritten)."""
        q = connection.ops.quote_name
        table, column, pk = q(c.table), q(c.column), q(c.pk_column)
        done = rotated = 0
        last_pk = None
        suffix = f" {c.label}"
        write_progress(self.stdout, 0, total, suffix)
        while True:
            with transaction.atomic(), connection.cursor() as cursor:
                after, params = ("", []) if last_pk is None else (f"AND {pk} > %s", [last_pk])
                cursor.execute(
                    f"SELECT {pk}, {column} FROM {table} WHERE {column} <> '' {after} ORDER BY {pk} LIMIT %s",
                    [*params, BATCH],
                )
                rows = cursor.fetchall()
                if not rows:
                    break
                for row_pk, token in rows:
                    try:
                        newest.decrypt(token.encode())
                    except InvalidToken:
                        try:
                            fresh = everything.rotate(token.encode()).decode()
                        except InvalidToken as exc:
                            raise CommandError(f"{c.label} {row_pk}: no configured key decrypts this secret "
                                               "(earlier batches stay re-encrypted; run again once it is fixed)") from exc
                        cursor.execute(f"UPDATE {table} SET {column} = %s WHERE {pk} = %s AND {column} = %s",
                                       [fresh, row_pk, token])
                        rotated += cursor.rowcount
                    done += 1
                last_pk = rows[-1][0]
            write_progress(self.stdout, done, total, suffix)
        self.stdout.write("")
        return done, rotated
