"""Who may do what, in the curation UI and (through `rights_of`) in the API: Django permissions,
granted through the role groups.

viewer: VIEW. curator: VIEW + CURATE (edit, rate, evolve, restore, review merges).
admin: all of those + REVEAL (audited secret reveal) + AUDIT. Superusers have every permission.
"""
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

from curation.views.common import UNEXPECTED_REFUSALS, refusal_response
from agents.roles import AUDIT, CURATE, REVEAL, ROLES, VIEW, Rights, is_person, rights_of  # noqa: F401 - the UI's names

def require(perm: str):
    """Anonymous users go to the login page; logged-in users without `perm` get 403. A registered operation's
    refusal that the view did not answer itself becomes a 4xx with its reason (`refusal_response`), never a 500."""
    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.has_perm(perm):
                raise PermissionDenied(f"needs the permission {perm}")
            try:
                return view(request, *args, **kwargs)
            except UNEXPECTED_REFUSALS as exc:
                return refusal_response(request, exc)
        return login_required(wrapped)
    return decorator


def role_context(request) -> dict:
    """Template flags: what the current user may do (context processor)."""
    user = getattr(request, "user", None)
    if not is_person(user):
        return {}
    return {"can_curate": user.has_perm(CURATE), "can_reveal": user.has_perm(REVEAL), "can_audit": user.has_perm(AUDIT)}
