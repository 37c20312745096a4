"""Bearer tokens: DRF authentication by `Authorization: Bearer <token>`, and `active_token` for MCP."""
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _
from rest_framework import authentication, exceptions

from agents.models import AgentToken
from agents.services import hash_key


# `last_used_at` says whether a token is still in use, to the minute: writing it on every request made each
# read a committed write (a WAL flush) and queued an agent's parallel requests on the token's row lock.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def active_token(raw_key: str) -> AgentToken | None:
    """The active token for a raw key (REST and MCP alike), marking it used (at most once a minute);
    None when unknown or revoked."""
    token = AgentToken.objects.filter(key_hash=hash_key(raw_key), is_active=True).first()
    if token is not None:
        mark_used(token)
    return token


def mark_used(token: AgentToken) -> None:
    now = timezone.now()
    stale = now - LAST_USED_RESOLUTION
    if token.last_used_at is not None and token.last_used_at > stale:
        return
    # conditional, so of many processes seeing the same stale time one writes and the rest match no row
    AgentToken.objects.filter(Q(last_used_at__isnull=True) | Q(last_used_at__lte=stale), pk=token.pk).update(
        last_used_at=now)
    token.last_used_at = now


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


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0] != self.keyword:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(_("Authorization header must be 'Bearer <token>'"))
        token = active_token(header[1])
        if token is None:
            raise exceptions.AuthenticationFailed(_("invalid or revoked token"))
        return AgentUser(token), token

    def authenticate_header(self, request):
        return self.keyword
