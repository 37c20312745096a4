"""Writes for agent tokens."""
import hashlib
import secrets

from agents.models import AgentToken
from agents.static_filters import check_static_filters

TOKEN_PREFIX = "kh_"


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


def agent_token_create(
    *, agent_id: str, readable_scopes: list[str], writable_scopes: list[str] | None = None,
    can_read_secrets: bool = False, static_filters=None, name: str = "", can_curate: bool = False,
) -> tuple[AgentToken, str]:
    """Create a token; returns it with the raw key, which is never stored."""
    if static_filters:
        check_static_filters(static_filters)  # raises a DomainError (FilterError) naming what is wrong
    raw_key = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = AgentToken.objects.create(
        agent_id=agent_id, name=name, key_prefix=raw_key[:10], key_hash=hash_key(raw_key),
        readable_scopes=list(readable_scopes),
        writable_scopes=list(readable_scopes if writable_scopes is None else writable_scopes),
        can_read_secrets=can_read_secrets, can_curate=can_curate, static_filters=static_filters or None,
    )
    return token, raw_key

