"""Who may do what, in the curation UI and (through `rights_of`) in the API: Django permissions,
granted through the role groups.

viewer: VIEW. curator: VIEW + CURATE (edit, rate, evolve, restore, review merges).
admin: all of those + REVEAL (audited secret reveal) + AUDIT. Superusers have every permission.
"""
from dataclasses import dataclass
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

VIEW = "knowledge.view_knowledge"
CURATE = "knowledge.change_knowledge"
REVEAL = "resources.reveal_resource"
AUDIT = "agents.view_auditevent"
ROLES = ("viewer", "curator", "admin")


@dataclass(frozen=True)
class Rights:
    """What a logged-in user's role lets them do; the API's session callers are built from this."""

    view: bool  # read every page and every scope
    curate: bool  # also every write: feedback, score, evolve, edit, save, slim
    reveal: bool  # also reveal secrets (audited)


def rights_of(user) -> Rights:
    """The user's rights from the same permissions the UI checks. Writing and revealing need VIEW too
    (one cannot change what one may not read); inactive and anonymous users get none."""
    view = is_person(user) and user.has_perm(VIEW)
    return Rights(view=view, curate=view and user.has_perm(CURATE), reveal=view and user.has_perm(REVEAL))


def require(perm: str):
    """Anonymous users go to the login page; logged-in users without `perm` get 403."""
    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.has_perm(perm):
                raise PermissionDenied(f"needs the permission {perm}")
            return view(request, *args, **kwargs)
        return login_required(wrapped)
    return decorator


def role_context(request) -> dict:
    """Template flags: what the current user may do (context processor)."""
    user = getattr(request, "user", None)
    if not is_person(user):
        return {}
    return {"can_curate": user.has_perm(CURATE), "can_reveal": user.has_perm(REVEAL), "can_audit": user.has_perm(AUDIT)}


def is_person(user) -> bool:
    """A logged-in Django user; not anonymous, and not an agent token (DRF puts `AgentUser` on
    request.user, which a page rendered by the API, such as /api/docs/, then sees)."""
    return bool(user is not None and user.is_authenticated and hasattr(user, "has_perm"))
