"""Login throttling (django-axes): which address a login comes from, and how long a lockout lasts."""
from datetime import timedelta
from math import ceil

from django.conf import settings


def client_address(request) -> str | None:
    """The address the throttle counts: REMOTE_ADDR, or behind a proxy the address the nearest proxy saw.

    Every proxy appends the address it received the request from to X-Forwarded-For, so
    only the last KNOWHUB_PROXY_COUNT entries were written by proxies we run; anything to
    their left is the client's to invent, and trusting it would let one client rotate addresses.
    """
    remote = request.META.get("REMOTE_ADDR")
    if not settings.KNOWHUB_BEHIND_PROXY:
        return remote
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    count = max(settings.KNOWHUB_PROXY_COUNT, 1)
    return hops[-count] if len(hops) >= count else remote


def cooloff_minutes(cooloff: timedelta | None) -> int | None:
    """Whole minutes a lockout lasts (rounded up), or None when only an admin can lift it."""
    if not cooloff:
        return None
    return max(ceil(cooloff.total_seconds() / 60), 1)
