"""Roles of people: which Django permissions each role group grants, and what they let a person do.

The curation UI checks these permissions on every page (`curation.permissions.require`); the API
builds a session caller's rights from the same ones (`agents.caller.Caller.for_user`), so the two
cannot disagree. viewer: VIEW. curator: VIEW + CURATE. admin: those + REVEAL + AUDIT.
"""
from dataclasses import dataclass

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


def is_person(user) -> bool:
    """A logged-in Django user; not anonymous, and not an agent token (DRF puts `AgentUser` on
    request.user, which a page rendered by the API, such as /api/docs/, then sees)."""
    return bool(user is not None and user.is_authenticated and hasattr(user, "has_perm"))
