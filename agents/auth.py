"""Bearer tokens: DRF authentication by `Authorization: Bearer <token>`, and `active_token` for MCP."""
from datetime import timedelta

from django.utils import timezone
from django.utils.translation import gettext as _
from rest_framework import authentication, exceptions

from agents.models import AgentToken
from agents.services import hash_key
from core.compiled import CompiledRead


# How precisely `last_used_at` is kept: writing it on every request would make every read a write, and every
# concurrent request of one agent wait for the others' lock on its token's row.
LAST_USED_PRECISION = timedelta(minutes=1)


def _active_by_hash(*, key_hash: str):
    return AgentToken.objects.filter(key_hash=key_hash, is_active=True)


# Every request with a token runs it: its SQL compiled once (core.compiled), a fifth of the ORM's queryset compiled
# again on every call (~1 ms of CPU); the row still becomes a model instance through each field's converter.
_active_by_hash_read = CompiledRead(_active_by_hash)


def token_by_key(raw_key: str) -> AgentToken | None:
    """The active token whose key is `raw_key`, in one statement; None when unknown or revoked."""
    found = _active_by_hash_read(key_hash=hash_key(raw_key))
    return found[0] if found else None


def active_token(raw_key: str) -> AgentToken | None:
    """The active token for a raw key (REST and MCP alike), marking it used (to the minute); None when unknown
    or revoked."""
    token = token_by_key(raw_key)
    if token is not None:
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at >= LAST_USED_PRECISION:
            AgentToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


class AgentUser:
    """What DRF puts in request.user for a token: authenticated, not a Django user."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False

    def __init__(self, token: AgentToken):
        self.token = token
        self.username = f"agent:{token.agent_id}"

    def get_username(self) -> str:
        return self.username


def is_bearer(scheme: str) -> bool:
    """Whether an Authorization header's scheme is Bearer: schemes are case-insensitive (RFC 9110 11.1), so `bearer`
    and `BEARER` are too."""
    return scheme.lower() == "bearer"


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or not is_bearer(header[0]):
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(_("Authorization header must be 'Bearer <token>'"))
        token = active_token(header[1])
        if token is None:
            raise exceptions.AuthenticationFailed(_("invalid or revoked token"))
        return AgentUser(token), token

    def authenticate_header(self, request):
        return self.keyword
