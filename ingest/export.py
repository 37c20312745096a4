"""Export: everything a caller may read, as JSON Lines that `ingest.importer` reads back losslessly.

The first line is a header; then one line per resource (with its versions), then one per knowledge
item (with its versions, feedback history, resource links, merge link and vector), then one per
rejected merge pair. Resources come first so that an import can link items to them as it goes.

Secrets stay encrypted. By default a secret is the installation's own ciphertext, exactly as stored
(an import into a hub with the same KNOWHUB_ENCRYPTION_KEYS reads it); with a passphrase each one is
decrypted and encrypted again under a key derived from the passphrase (`ingest.passphrase`), for a move
to another installation; the header then carries a key check, so an import refuses a wrong passphrase at
once. A caller without secret access gets no secrets at all (the header says so).

Vectors go out with their model's name, so a hub with the same embedder imports them without
re-embedding. Without them (`vectors=False`) an export is about an eighth the size (an item's two models' vector is
~13 kB of JSON, more than most items' text), and the importing hub's worker embeds the items again.
"""
import base64
from collections.abc import Iterator

from django.db.models import Prefetch, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from agents.caller import Caller
from ingest import passphrase as sealed
from knowledge.models import FeedbackCase, Knowledge, KnowledgeVersion, SlimRejection
from resources import crypto
from resources.models import Resource, ResourceVersion, RevealEvent
from resources.services import secret_expired

FORMAT = "knowhub-export"
VERSION = 1
BATCH = 500


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


class _Secrets:
    """How the secrets of this export are written: as stored, under a passphrase, or not at all.

    Sealing under a passphrase hands the secret to whoever holds the passphrase, so each one is recorded as a
    reveal (RevealEvent), like any other. Either way an export hands out no secret a reveal would refuse: the
    installation's ciphertext is a secret too (imported here under a new id, it is revealed as that resource's).
    So, but for the operator's command (a backup of the whole installation), an expired secret is left out, and an
    agent gets the current secret only, as it reveals only that (a person with secret access, an admin, reveals
    earlier versions too)."""

    def __init__(self, caller: Caller, passphrase: str | None):
        self.caller = caller
        self.included = caller.can_read_secrets
        self.salt = sealed.new_salt() if passphrase and self.included else None
        self.key = sealed.derive_key(passphrase, self.salt) if self.salt else None

    def header(self) -> dict:
        if not self.included:
            return {"mode": "omitted"}
        if self.key is None:
            return {"mode": "installation"}
        # the key check: an import tells a wrong passphrase from the header, before it stores anything
        return {"mode": "passphrase", **sealed.KDF, "salt": base64.b64encode(self.salt).decode(),
                "check": sealed.key_check(self.key)}

    def write(self, stored: str, owner, *, resource_id: str, version: int | None = None) -> str:
        """A secret as exported, from its stored ciphertext (`owner`: the resource or version it belongs to)."""
        if not stored or not self.included:
            return ""
        if not self.caller.principal.startswith("command:"):
            if secret_expired(owner):
                return ""
            if version is not None and self.caller.principal.startswith("agent:"):
                return ""
        if self.key is None:
            return stored
        RevealEvent.objects.create(principal=self.caller.principal, resource_id=resource_id, version=version,
                                   user_agent="export sealed under a passphrase")
        return sealed.seal(crypto.decrypt(stored), self.key)


def _with_raw_secrets(queryset, included: bool):
    """The rows without their decrypted secret; with `included`, each one's stored ciphertext as `raw_secret`."""
    queryset = queryset.defer("secure_body")
    return queryset.annotate(raw_secret=Cast("secure_body", TextField())) if included else queryset


def export_records(caller: Caller, *, scopes: list[str] | None = None, passphrase: str | None = None,
                   embedding_model: str = "", vectors: bool = True) -> Iterator[dict]:
    """The records of an export of what `caller` may read (narrowed to `scopes` when given), header first; the
    items' vectors unless `vectors` is False."""
    secrets = _Secrets(caller, passphrase)
    knowledge = Knowledge.objects.visible_to(caller)
    resources = Resource.objects.visible_to(caller)
    if scopes:
        knowledge, resources = knowledge.filter(scopes__overlap=scopes), resources.filter(scopes__overlap=scopes)
    yield {"kind": FORMAT, "version": VERSION, "exported_at": _iso(timezone.now()), "exported_by": caller.principal,
           "scopes": scopes or None, "secrets": secrets.header(), "embedding_model": embedding_model, "vectors": vectors,
           "counts": {"resources": resources.count(), "knowledge": knowledge.count()}}
    yield from _resources(resources, secrets)
    yield from _knowledge(knowledge, vectors=vectors)
    ids = knowledge.values("id")
    for first, second, by, at in (SlimRejection.objects.filter(first__in=ids, second__in=ids).order_by("id")
                                  .values_list("first_id", "second_id", "rejected_by", "created_at")):
        yield {"kind": "slim_rejection", "first": first, "second": second, "rejected_by": by, "created_at": _iso(at)}
    # the last line: an export without it was cut short (the importer says so)
    yield {"kind": "end"}


def _resources(resources, secrets: _Secrets) -> Iterator[dict]:
    versions = Prefetch("versions", queryset=_with_raw_secrets(ResourceVersion.objects.order_by("number"),
                                                               secrets.included))
    for r in (_with_raw_secrets(resources, secrets.included).order_by("id").prefetch_related(versions)
              .iterator(chunk_size=BATCH)):
        yield {
            "kind": "resource", "id": r.id, "title": r.title, "body": r.body,
            "secure_body": secrets.write(getattr(r, "raw_secret", ""), r, resource_id=r.id),
            "content_type": r.content_type, "metadata": r.metadata, "scopes": list(r.scopes), "owner": r.owner,
            "expires_at": _iso(r.expires_at), "is_expired": r.is_expired,
            "created_at": _iso(r.created_at), "updated_at": _iso(r.updated_at),
            "versions": [{"number": v.number, "title": v.title, "body": v.body,
                          "secure_body": secrets.write(getattr(v, "raw_secret", ""), v, resource_id=r.id,
                                                       version=v.number),
                          "content_type": v.content_type,
                          "metadata": v.metadata, "expires_at": _iso(v.expires_at), "replaced_by": v.replaced_by,
                          "created_at": _iso(v.created_at)} for v in r.versions.all()],
        }


def _knowledge(knowledge, *, vectors: bool) -> Iterator[dict]:
    related = (
        Prefetch("versions", queryset=KnowledgeVersion.objects.order_by("number")),
        Prefetch("feedback_cases", queryset=FeedbackCase.objects.order_by("id")),
        "resource_links",
    )
    items = knowledge.order_by("created_at", "id").prefetch_related(*related)
    if not vectors:
        items = items.defer("embedding")  # each one read out of line: left unread
    for k in items.iterator(chunk_size=BATCH):
        yield {
            "kind": "knowledge", "id": k.id, "message_id": k.message_id, "types": list(k.types), "task": k.task,
            "content": k.content, "tags": k.tags, "scopes": list(k.scopes), "owner": k.owner, "source": k.source,
            "resource_ids": k.resource_ids, "secure_resource_id": k.secure_resource_id,
            "score": k.score, "helpful": k.helpful, "harmful": k.harmful, "confidence": k.confidence,
            "status": k.status, "merged_into": k.merged_into_id, "superseded_by": k.superseded_by_id,
            "created_at": _iso(k.created_at), "updated_at": _iso(k.updated_at),
            "feedback": [{"kind": c.kind, "case": c.case, "reported_by": c.reported_by, "created_at": _iso(c.created_at)}
                         for c in k.feedback_cases.all()],
            "versions": [{"number": v.number, "task": v.task, "content": v.content, "tags": v.tags,
                          "changed_by": v.changed_by, "reason": v.reason, "created_at": _iso(v.created_at)}
                         for v in k.versions.all()],
            "embedding": [float(x) for x in k.embedding] if vectors and k.embedding is not None else None,
            "embedding_model": k.embedding_model if vectors else "",
        }
