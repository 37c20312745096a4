"""Who queued a job, as they are now: a worker writes with the rights its requester holds when the job runs.

A job can wait in the queue for minutes; a token revoked or an account disabled in between must not keep writing
through it. `requester_now` reads the requester's token (by its row, recorded with the job) or account again.
"""
import dataclasses

from django.contrib.auth import get_user_model
from django.utils.translation import gettext as _

from agents.caller import Caller
from agents.models import AgentToken
from core.errors import DomainError


class RequesterGone(DomainError):
    """The job's requester may no longer write: its token revoked, its account disabled, deleted or read-only."""

    status = 403
    code = "permission_denied"


def requester_now(queued: Caller) -> Caller:
    """`queued`'s principal with the rights it holds now; RequesterGone when it may no longer write at all.

    A caller queued without its token's row (a job queued before it was recorded, a command, the hub itself) is
    returned as queued."""
    if queued.token_id is not None:
        token = AgentToken.objects.filter(pk=queued.token_id, is_active=True).first()
        if token is None:
            raise RequesterGone(_("the token that queued this job has been revoked: nothing was written"))
        return Caller.for_token(token)
    if queued.principal.startswith("user:"):
        user = get_user_model().objects.filter(username=queued.principal.removeprefix("user:"), is_active=True).first()
        if user is None:
            raise RequesterGone(_("the account that queued this job is disabled: nothing was written"))
        now = Caller.for_user(user)
        if now.read_only:
            raise RequesterGone(_("the account that queued this job may no longer write: nothing was written"))
        return now
    return queued


def requester_writing(principal: str, token_id: int | None, scopes, *, every: bool) -> Caller:
    """The requester `principal` (its token's row `token_id`, when an agent's) as it is now, RequesterGone unless it
    may still write `scopes`: every one of them (`every`: a document's) or at least one (an item's rule)."""
    now = requester_now(dataclasses.replace(Caller.system(principal), token_id=token_id))
    refused = now.may_write(scopes)
    if refused and (every or len(refused) == len(scopes)):
        raise RequesterGone(_("the requester may no longer write to scope(s): %(scopes)s") % {"scopes": ", ".join(refused)})
    return now
