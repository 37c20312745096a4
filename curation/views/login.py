"""The page a locked-out login gets, from /login/ and the admin login alike (AXES_LOCKOUT_CALLABLE)."""
from axes.helpers import get_client_username, get_cool_off
from django.shortcuts import render

from curation.throttle import cooloff_minutes


def locked_out(request, original_response=None, credentials=None):
    return render(request, "curation/login.html", {
        "locked": True,
        "locked_minutes": cooloff_minutes(get_cool_off(request)),
        "username": get_client_username(request, credentials) or "",
    }, status=429)
