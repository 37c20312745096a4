"""Secrets sealed under a passphrase, for moving an export to another installation.

The key is derived with scrypt (the parameters and a random salt go into the export's header), and
each secret is a Fernet token under that key: authenticated, so a wrong passphrase is detected rather
than producing garbage. The header also carries a key check (`check`: a fixed text sealed under the key,
so it says nothing of the passphrase that the sealed secrets do not): a wrong passphrase is told from the
header alone, before anything is imported. An export written before the check was added is checked on its
first sealed secret instead (`ingest.importer.check_file`).
"""
import base64
import binascii
import os

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
from django.utils.translation import gettext as _

from core.errors import DomainError

KDF = {"kdf": "scrypt", "n": 2**15, "r": 8, "p": 1}
MIN_LENGTH = 8


class WrongPassphrase(DomainError):
    """A passphrase too short, or not the one the export was sealed with (400 naming `passphrase`)."""

    def __init__(self, message: str):
        super().__init__(message, field="passphrase")


def new_salt() -> bytes:
    return os.urandom(16)


def derive_key(passphrase: str, salt: bytes, *, n: int = KDF["n"], r: int = KDF["r"], p: int = KDF["p"]) -> Fernet:
    if len(passphrase) < MIN_LENGTH:
        raise WrongPassphrase(_("a passphrase has at least %(count)s characters") % {"count": MIN_LENGTH})
    raw = Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(passphrase.encode())
    return Fernet(base64.urlsafe_b64encode(raw))


CHECK_TEXT = "knowhub-export key check"


def key_check(key: Fernet) -> str:
    """The header's key check for `key`: a fixed text sealed under it (`verify_key` opens it)."""
    return seal(CHECK_TEXT, key)


def verify_key(key: Fernet, check) -> None:
    """WrongPassphrase unless `check` (a header's key check) opens under `key` to the fixed text."""
    if not isinstance(check, str) or unseal(check, key) != CHECK_TEXT:
        raise WrongPassphrase(_("the passphrase does not open this export's secrets"))


def key_from_header(passphrase: str, header: dict) -> Fernet:
    """The key an export's `secrets` header describes, for `passphrase`; WrongPassphrase when the header's key
    check (if it has one) does not open under it. Only our own parameters are taken: a header asking for more
    memory or time than they cost is refused, not obeyed."""
    if any(header.get(name) != value for name, value in KDF.items()):
        raise WrongPassphrase(_("the export's key parameters are not this hub's (%(kdf)s): it cannot be opened here")
                              % {"kdf": KDF})
    try:
        salt = base64.b64decode(header["salt"], validate=True)
    except (KeyError, TypeError, binascii.Error):
        raise WrongPassphrase(_("the export's header has no valid salt for its passphrase")) from None
    key = derive_key(passphrase, salt)
    if "check" in header:
        verify_key(key, header["check"])
    return key


def seal(secret: str, key: Fernet) -> str:
    return key.encrypt(secret.encode()).decode()


def unseal(token: str, key: Fernet) -> str:
    try:
        return key.decrypt(token.encode()).decode()
    except (InvalidToken, UnicodeError):  # not a token of this key (a lone surrogate cannot even be one)
        raise WrongPassphrase(_("the passphrase does not open this export's secrets")) from None
