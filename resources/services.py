"""Writes to resources, and the audited reveal of their secrets.

Every function takes the caller (agents.caller.Caller) first: the owner, who replaced a version and
who saw a secret come from it, a new resource's scopes pass its write check, and a reveal is refused
to a caller without the right to read secrets, whichever entry point asked.
"""
import hashlib
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from rest_framework.exceptions import PermissionDenied

from core.errors import DomainError
from resources.models import Resource


class ResourceExistsError(DomainError):
    status = 409
    code = "conflict"

    def __init__(self, resource_id: str):
        super().__init__(f"a resource with id {resource_id} already exists", field="id")


def resource_create(caller, *, resource_id: str, title: str, scopes: list[str], body: str = "", secure_body: str = "",
                    content_type: str = "text", metadata: dict | None = None, expires_at=None) -> Resource:
    caller.require_write(scopes)
    owner = caller.principal
    try:
        with transaction.atomic():
            return Resource.objects.create(
                id=resource_id, title=title, body=body, secure_body=secure_body, content_type=content_type,
                metadata=metadata or {}, scopes=scopes, owner=owner, expires_at=expires_at,
            )
    except IntegrityError as exc:
        if Resource.objects.filter(pk=resource_id).exists():
            raise ResourceExistsError(resource_id) from exc
        raise


@transaction.atomic
def resource_save_version(caller, *, resource_id: str, title: str, body: str = "", secure_body: str = "",
                          content_type: str = "text", metadata: dict | None = None, expires_at=None) -> Resource:
    """Save an existing id again (seed resource_save): the previous state becomes a version, secret still encrypted."""
    from resources.models import ResourceVersion

    resource = Resource.objects.select_for_update().get(pk=resource_id)
    last = resource.versions.order_by("-number").values_list("number", flat=True).first() or 0
    ResourceVersion.objects.create(
        resource=resource, number=last + 1, title=resource.title, body=resource.body, secure_body=resource.secure_body,
        content_type=resource.content_type, metadata=resource.metadata, expires_at=resource.expires_at,
        replaced_by=caller.principal,
    )
    resource.title, resource.body, resource.secure_body = title, body, secure_body
    resource.content_type, resource.metadata, resource.expires_at = content_type, metadata or {}, expires_at
    resource.is_expired = False
    resource.updated_at = timezone.now()
    resource.save()
    return resource


CONTENT_FIELDS = ("title", "body", "content_type", "metadata", "expires_at")  # a change keeps the old state as a version
PLAIN_FIELDS = ("scopes", "owner")


@transaction.atomic
def resource_change_fields(caller, *, resource_id: str, changes: dict) -> Resource:
    """A curator's change (the admin): content through `resource_save_version` (the secret kept as it is),
    scopes and owner in place. Raises Resource.DoesNotExist; ValueError for a field that is not editable."""
    unknown = set(changes) - set(CONTENT_FIELDS) - set(PLAIN_FIELDS)
    if unknown:
        raise ValueError(f"not editable: {', '.join(sorted(unknown))}")
    resource = Resource.objects.select_for_update().get(pk=resource_id)
    if set(changes) & set(CONTENT_FIELDS):
        current = {name: getattr(resource, name) for name in CONTENT_FIELDS}
        resource = resource_save_version(caller, resource_id=resource_id, secure_body=resource.secure_body,
                                         **{**current, **{k: v for k, v in changes.items() if k in CONTENT_FIELDS}})
    plain = {name: changes[name] for name in PLAIN_FIELDS if name in changes}
    if plain:
        Resource.objects.filter(pk=resource_id).update(**plain, updated_at=timezone.now())
    return Resource.objects.get(pk=resource_id)


class SecretExpired(Exception):
    """An expired cookie or credential: never revealed."""

    def __init__(self, expires_at):
        super().__init__(f"expired at {expires_at.isoformat()}")
        self.expires_at = expires_at


def secret_expired(obj) -> bool:
    """Whether a resource's (or an earlier version's) secret is past its expiry."""
    return bool(obj.expires_at and obj.expires_at <= timezone.now())


SECRETS_REFUSED = gettext_noop("this caller may not read secrets")  # translated when raised


def resource_reveal(caller, *, resource: Resource, remote_addr: str | None, user_agent: str = "") -> str:
    """The secret, with a RevealEvent written first: no reveal goes unrecorded. Raises SecretExpired, or
    PermissionDenied for a caller without the right to read secrets."""
    return _audited_reveal(caller, resource, resource_id=resource.pk, version=None, remote_addr=remote_addr,
                           user_agent=user_agent)


def resource_version_reveal(caller, *, version, remote_addr: str | None, user_agent: str = "") -> str:
    """An earlier version's secret (the admin's), audited like every reveal. Raises SecretExpired or PermissionDenied."""
    return _audited_reveal(caller, version, resource_id=version.resource_id, version=version.number,
                           remote_addr=remote_addr, user_agent=user_agent)


def _audited_reveal(caller, obj, *, resource_id: str, version: int | None, remote_addr: str | None,
                    user_agent: str) -> str:
    from resources.models import RevealEvent

    if not caller.can_read_secrets:
        raise PermissionDenied(_(SECRETS_REFUSED))
    if secret_expired(obj):
        raise SecretExpired(obj.expires_at)
    RevealEvent.objects.create(principal=caller.principal, resource_id=resource_id, version=version,
                               remote_addr=remote_addr or None, user_agent=user_agent[:300])
    return obj.secure_body


def resources_mark_expired() -> list[str]:
    """Flag resources whose expiry has passed; returns the ids newly flagged."""
    due = Resource.objects.filter(expires_at__lte=timezone.now(), is_expired=False)
    ids = list(due.values_list("id", flat=True))
    Resource.objects.filter(pk__in=ids).update(is_expired=True)
    return ids


def resources_announce_expiring(*, within: timedelta) -> list[str]:
    """Announce `resource.expiring` for each resource whose expiry falls within `within` from now; returns their ids.

    Run by every periodic check, so each announcement has a stable event id (the resource and its expiry):
    a listener keeps one delivery per id, and a resource saved with a new expiry is announced again."""
    from core import events

    now = timezone.now()
    due = Resource.objects.filter(expires_at__gt=now, expires_at__lte=now + within, is_expired=False)
    ids = []
    for resource_id, scopes, expires_at, content_type in due.values_list("id", "scopes", "expires_at", "content_type"):
        digest = hashlib.sha256(f"{resource_id}\n{expires_at.isoformat()}".encode()).hexdigest()[:32]
        events.emit(events.RESOURCE_EXPIRING, scopes=scopes, event_id=f"msg_expiring_{digest}", data={
            "resource_id": resource_id, "content_type": content_type, "expires_at": expires_at.isoformat()})
        ids.append(resource_id)
    return ids


@transaction.atomic
def resource_restore(caller, record: dict, *, secret, version_secret) -> Resource:
    """Store an exported resource and its versions exactly (ingest.importer). `secret()` and
    `version_secret(version)` give each secret as a `(text, ciphertext)` pair, one of them empty: the
    plaintext to encrypt (an export under a passphrase) or the installation's own ciphertext, stored as it is."""
    from django.db.models import TextField, Value
    from django.utils.dateparse import parse_datetime

    from resources.models import ResourceVersion

    caller.require_write(record.get("scopes") or [])
    when = lambda value: parse_datetime(value) if value else None  # noqa: E731
    plain, sealed = secret()
    resource = Resource.objects.create(
        id=record["id"], title=record["title"], body=record.get("body", ""), secure_body=plain,
        content_type=record.get("content_type", "text"), metadata=record.get("metadata") or {},
        scopes=record.get("scopes") or [], owner=record.get("owner") or caller.principal,
        expires_at=when(record.get("expires_at")), is_expired=bool(record.get("is_expired")),
        created_at=when(record.get("created_at")) or timezone.now(), updated_at=when(record.get("updated_at")) or timezone.now())
    if sealed:
        Resource.objects.filter(pk=resource.pk).update(secure_body=Value(sealed, output_field=TextField()))
    for v in record.get("versions") or []:
        plain, sealed = version_secret(v)
        version = ResourceVersion.objects.create(
            resource=resource, number=v["number"], title=v["title"], body=v.get("body", ""), secure_body=plain,
            content_type=v.get("content_type", "text"), metadata=v.get("metadata") or {},
            expires_at=when(v.get("expires_at")), replaced_by=v.get("replaced_by", ""),
            created_at=when(v.get("created_at")) or resource.created_at)
        if sealed:
            ResourceVersion.objects.filter(pk=version.pk).update(secure_body=Value(sealed, output_field=TextField()))
    return resource
