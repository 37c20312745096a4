"""Who is calling: an agent with a token, or a logged-in user with a browser session.

A session caller gets exactly its role's rights (`curation.permissions.rights_of`, the same
permissions the curation UI checks), so the API and the UI cannot disagree:

| role | reads | writes (feedback included) | edits items it does not own, curators' operations | reveals secrets |
|---|---|---|---|---|
| viewer | every scope | none | no | no |
| curator | every scope | every scope | yes | no |
| admin (or superuser) | every scope | every scope | yes | yes |
| no role | nothing: the API answers 403 | none | no | no |

A token is an agent's: its own scopes, and the curators' operations only when it is a curator
token (`can_curate`), within its writable scopes.
"""
from dataclasses import dataclass

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission

from agents.roles import rights_of

NO_ROLE = gettext_lazy("this account has no role (viewer, curator or admin): ask an admin to add you to one")


@dataclass(frozen=True)
class Caller:
    principal: str  # agent:<id> or user:<username>
    agent_id: str
    readable_scopes: tuple[str, ...] | None  # None: every scope (users with a role)
    writable_scopes: tuple[str, ...] | None  # None: every scope (curators, admins)
    can_read_secrets: bool = False
    static_filters: object = None
    read_only: bool = False  # no writes of any kind, feedback included (viewers)
    edits_any: bool = False  # may edit items it does not own (curators, admins, curator tokens); agents edit their own
    curates: bool = False  # curators' operations: unmerge, merge review, evolve rollback (curators, admins, curator tokens)
    has_role: bool = True  # False: a logged-in user in no role group, refused by the API
    token_id: int | None = None  # the token's row (agents): a job queued now can check later that it still holds

    @classmethod
    def for_token(cls, token) -> "Caller":
        return cls(
            principal=f"agent:{token.agent_id}", agent_id=token.agent_id,
            readable_scopes=tuple(token.readable_scopes), writable_scopes=tuple(token.writable_scopes),
            can_read_secrets=token.can_read_secrets, static_filters=token.static_filters,
            edits_any=token.can_curate, curates=token.can_curate, token_id=token.pk,
        )

    @classmethod
    def for_user(cls, user) -> "Caller":
        """The user's role as a caller; a user without one sees and writes nothing."""
        rights = rights_of(user)
        name = user.get_username()
        return cls(
            principal=f"user:{name}", agent_id=name,
            readable_scopes=None if rights.view else (), writable_scopes=None if rights.curate else (),
            can_read_secrets=rights.reveal, read_only=not rights.curate, edits_any=rights.curate, curates=rights.curate,
            has_role=rights.view,
        )

    @classmethod
    def system(cls, principal: str) -> "Caller":
        """The hub acting on its own (a job, an import, a benchmark), recorded as `principal`: it may write and
        curate every scope, but never reads a secret."""
        return cls(principal=principal, agent_id=principal, readable_scopes=None, writable_scopes=None,
                   edits_any=True, curates=True)

    def may_write(self, scopes) -> list[str]:
        """The scopes of `scopes` this caller may not write (empty when all are allowed)."""
        if self.read_only:
            return list(scopes)
        if self.writable_scopes is None:
            return []
        return [s for s in scopes if s not in self.writable_scopes]

    def may_write_any(self, scopes) -> bool:
        """Whether the caller may write at least one of `scopes` (an item's or a resource's)."""
        return len(self.may_write(scopes)) < len(scopes)

    def scopes_to_write(self, requested) -> list[str]:
        """The one default-scope rule: the scopes asked for, or else the token's first writable scope.

        Raises PermissionDenied when none results (a person has no default scope) or when the caller
        may not write one of them (`require_write`)."""
        scopes = list(requested or ()) or list(self.writable_scopes or ())[:1]
        if not scopes:
            raise PermissionDenied(_("name the scopes to write to (a person has no default scope)"))
        self.require_write(scopes)
        return scopes

    def require_write(self, scopes) -> None:
        """PermissionDenied naming the scopes of `scopes` this caller may not write."""
        refused = self.may_write(scopes)
        if refused:
            raise PermissionDenied(_("this caller may not write to scope(s): %(scopes)s") % {"scopes": ", ".join(refused)})


def caller_for_request(request) -> Caller:
    """The caller behind an authenticated DRF request: its agent token, or its user's role."""
    token = getattr(request.user, "token", None)
    return Caller.for_token(token) if token is not None else Caller.for_user(request.user)


class HasApiAccess(BasePermission):
    """DRF's default permission: an agent token, or a logged-in user with a role (403 without one).

    Anonymous requests are refused as by IsAuthenticated (401, since Bearer auth names a scheme).
    """

    message = NO_ROLE

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return caller_for_request(request).has_role
