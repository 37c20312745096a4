from django.db import models

from resources import crypto


class EncryptedTextField(models.TextField):
    """A text field stored as a Fernet token; the column never holds plaintext.

    Empty strings stay empty (nothing to hide, and it keeps "no secret"
    distinguishable without decrypting).
    """

    def from_db_value(self, value, expression, connection):
        if not value:
            return value
        return crypto.decrypt(value)

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        if not value:
            return value
        return crypto.encrypt(value)
