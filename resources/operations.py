"""The resource operations (seed 003, scenarios 1-4), declared once for REST, MCP and the audit."""
from django.http import Http404
from django.utils.translation import gettext as _
from rest_framework import status
from rest_framework.exceptions import APIException, PermissionDenied

from agents.caller import Caller
from agents.operations import operation
from agents.visibility import may_read
from core.safe_json import text_problem
from resources.models import Resource
from resources.serializers import ResourceGetInput, ResourceInput, ResourceOutput
from resources.services import ResourceExistsError, SecretExpired, resource_create, resource_reveal, resource_save_version


class Gone(APIException):
    status_code = status.HTTP_410_GONE
    default_code = "expired"


@operation("resource_save", input=ResourceInput, output=ResourceOutput, writes=True, permission="write", status=201)
def resource_save(caller: Caller, **data) -> Resource:
    """Create, or save a new version of an id the caller may write (the old one is kept). Of two first saves of an
    id at once, the later becomes its second version, as it would a moment later (it was a 409)."""
    resource_id, scopes = data.pop("id"), data.pop("scopes", None)
    try:
        return _save(caller, resource_id, scopes, data)
    except ResourceExistsError:  # created by another save since this one looked: look again
        return _save(caller, resource_id, scopes, data)


def _save(caller: Caller, resource_id: str, scopes, data: dict) -> Resource:
    existing = Resource.objects.filter(pk=resource_id).first()
    if existing is not None:
        if not may_read(caller.readable_scopes, existing.scopes):
            raise ResourceExistsError(resource_id)  # the id is taken; say no more about it
        if not caller.may_write_any(existing.scopes):
            raise PermissionDenied(_("this caller may not write to the scopes of %(ids)s") % {"ids": existing.pk})
        return resource_save_version(caller, resource_id=resource_id, **data)  # a new version keeps who may see it
    return resource_create(caller, resource_id=resource_id, scopes=caller.scopes_to_write(scopes), **data)


@operation("resource_get", input=ResourceGetInput, output=ResourceOutput)
def resource_get(caller: Caller, *, resource_id, reveal: bool, remote_addr: str | None = None,
                 user_agent: str = "") -> Resource:
    """A resource the caller can see; with `reveal`, its secret (audited), for tokens with secret access."""
    if not isinstance(resource_id, str) or text_problem(resource_id):  # no such id can exist (MCP passes any text)
        raise Http404
    resource = Resource.objects.visible_to(caller).filter(pk=resource_id).first()
    if resource is None:
        raise Http404
    if not reveal:
        return resource
    if not caller.can_read_secrets:
        raise PermissionDenied(_("this caller may not reveal secrets (a token with secret access, or the admin role)"))
    try:
        secret = resource_reveal(caller, resource=resource, remote_addr=remote_addr, user_agent=user_agent)
    except SecretExpired as exc:
        raise Gone(_("this %(type)s expired at %(at)s") % {"type": resource.content_type, "at": exc.expires_at.isoformat()}) from exc
    resource.revealed_secret = secret  # sent once, in this reply (ResourceOutput)
    return resource
