"""Authenticated encryption for secrets at rest (Fernet: AES-128-CBC + HMAC).

Keys come from KNOWHUB_ENCRYPTION_KEYS (comma-separated Fernet keys: the
first encrypts, all decrypt). When unset, a key is generated once under
var/encryption_key for local use; it is never derived from SECRET_KEY.
"""
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from core.env import persistent_secret

__all__ = ["InvalidToken", "decrypt", "encrypt", "fernet"]


def configured_keys() -> list[str]:
    if settings.KNOWHUB_ENCRYPTION_KEYS:
        return list(settings.KNOWHUB_ENCRYPTION_KEYS)
    local = persistent_secret(settings.VAR_DIR / "encryption_key", make=lambda: Fernet.generate_key().decode())
    return [local]


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key.encode()) for key in keys])


def fernet() -> MultiFernet:
    return _fernet(tuple(configured_keys()))


def encrypt(plaintext: str) -> str:
    return fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    return fernet().decrypt(token.encode()).decode()
