"""Writes to knowledge. Operations, serializers, jobs, the admin and commands call these.

Every write takes the caller (agents.caller.Caller) first: who is recorded (owner, changed_by) comes
from it, never from a string the entry point builds, and a new item's scopes pass its write check.
The hub's own writes (jobs, imports, benchmarks) act as `Caller.system(name)`.
"""
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from rest_framework.exceptions import PermissionDenied

from core import events
from knowledge.errors import KnowledgeIdConflictError, KnowledgeStateError, ResourceScopeError, UnknownResourceError
from knowledge.ids import MAX_SUFFIX_LENGTH, SUFFIX_LENGTH, new_knowledge_id
from knowledge.models import FeedbackCase, Knowledge, KnowledgeResource, KnowledgeStatus, KnowledgeVersion
from knowledge.search import indexing

SOURCE_KEYS = ("name", "category", "urls", "agent_id", "submitted_by", "timestamp", "message_id")
# Set by the hub, never by an agent's save: the document an ingested or imported item came from
# ({"kind", "uri", "content_hash", "chunk", ...}, see ingest).
DOCUMENT_KEY = "document"
ID_ATTEMPTS_PER_LENGTH = 3


def normalize_source(source: Mapping | None, *, now: datetime) -> dict:
    """All seven of the seed's source keys, defaults filled in, and the document an item came from, if any."""
    defaults = {
        "name": "",
        "category": "exp",
        "urls": [],
        "agent_id": "",
        "submitted_by": "",
        "timestamp": now.isoformat().replace("+00:00", "Z"),
        "message_id": "",
    }
    given = {key: value for key, value in (source or {}).items()
             if key in (*SOURCE_KEYS, DOCUMENT_KEY) and value is not None}
    return {**defaults, **given}


def knowledge_create(
    caller,
    *,
    task: str,
    content: str,
    types: Iterable[str],
    scopes: Iterable[str],
    owner: str | None = None,
    tags: Mapping[str, str] | None = None,
    source: Mapping | None = None,
    message_id: str = "",
    resource_ids: Iterable[str] = (),
    secure_resource_id: str = "",
    score: int = 3,
    helpful: int = 0,
    harmful: int = 0,
    confidence: float = 0.5,
    helpful_history: Iterable[Mapping] = (),
    harmful_history: Iterable[Mapping] = (),
    knowledge_id: str | None = None,
    created_at: datetime | None = None,
    updated_at: datetime | None = None,
    embed: bool = True,
    embedding: list[float] | None = None,
    embedding_model: str = "",
) -> Knowledge:
    """Store a new knowledge item and return it.

    `knowledge_id`, timestamps, counters, histories and a vector (`embedding` from `embedding_model`, whose
    index exists: `vector.ensure_index`) are for restoring an exported item exactly; agents' saves leave them
    unset. The item is
    keyword-searchable on commit; with `embed` a worker computes its vector
    (the save never waits for the model; `vector_status` says when it is done). The caller must be
    allowed to write every scope (PermissionDenied); `owner` defaults to the caller. Linked resources
    must be readable by the caller and by everyone who can read the item: their scopes must include
    all of the item's.
    """
    scopes = list(dict.fromkeys(scopes))
    resource_ids = list(dict.fromkeys(resource_ids))
    helpful_history, harmful_history = [dict(c) for c in helpful_history], [dict(c) for c in harmful_history]
    check_new_item(caller, scopes=scopes, resource_ids=resource_ids, secure_resource_id=secure_resource_id)
    now = timezone.now()
    created_at = created_at or now

    item = Knowledge(
        message_id=message_id,
        secure_resource_id=secure_resource_id,
        types=list(dict.fromkeys(types)),
        task=task,
        content=content,
        tags=dict(tags or {}),
        scopes=scopes,
        owner=owner or caller.principal,
        source=normalize_source(source, now=created_at),
        score=score,
        helpful=helpful,
        harmful=harmful,
        confidence=confidence,
        created_at=created_at,
        updated_at=updated_at or created_at,
        embedding=embedding,
        embedding_model=embedding_model if embedding is not None else "",
        # the keyword document in the INSERT itself, not an UPDATE after it (which rewrote the row and its indexes)
        **indexing.keyword_fields(task=task, content=content, tags=dict(tags or {})),
    )

    def store_the_rest():
        del item.search_document  # the expression it was stored from: read from the row if ever asked for
        KnowledgeResource.objects.bulk_create(
            KnowledgeResource(knowledge=item, resource_id=rid, position=i) for i, rid in enumerate(resource_ids)
        )
        FeedbackCase.objects.bulk_create(
            [FeedbackCase(knowledge=item, kind="helpful", case=c) for c in helpful_history]
            + [FeedbackCase(knowledge=item, kind="harmful", case=c) for c in harmful_history]
        )
        if embed and embedding is None:  # a vector given is the item's: nothing for the worker
            indexing.embed_with_this_write(knowledge_ids=[item.id])
        events.emit(events.KNOWLEDGE_CREATED, scopes=item.scopes, data=events.knowledge_data(item, by=caller.principal))

    _insert_with_unique_id(item, knowledge_id, then=store_the_rest)
    # What the reply shows of it, as `selectors.knowledge_visible` reads it back (a new item supersedes nothing):
    # the reply needs no read of the row just written.
    item.linked_resource_ids, item.supersedes_ids, item.histories_complete = resource_ids, [], True
    item.recent_helpful, item.recent_harmful = helpful_history[::-1], harmful_history[::-1]  # newest first, as read
    return item


def check_new_item(caller, *, scopes: list[str], resource_ids=(), secure_resource_id: str = "") -> None:
    """What a new item must pass before it is stored: `caller` may write every one of its scopes
    (PermissionDenied), and the resources it links, `secure_resource_id` included, are readable by the
    caller and by everyone who can read the item (UnknownResourceError, ResourceScopeError)."""
    caller.require_write(scopes)
    _check_resources(list(resource_ids), item_scopes=list(scopes), reader_scopes=caller.readable_scopes)
    if secure_resource_id:
        try:
            _check_resources([secure_resource_id], item_scopes=list(scopes), reader_scopes=caller.readable_scopes)
        except (UnknownResourceError, ResourceScopeError) as exc:
            exc.field = "secure_resource_id"
            raise


def _check_resources(resource_ids: list[str], *, item_scopes: list[str], reader_scopes) -> None:
    from resources.models import Resource

    if not resource_ids:
        return
    readable = Resource.objects.readable_with(reader_scopes).filter(id__in=resource_ids)
    found = dict(readable.values_list("id", "scopes"))
    missing = [rid for rid in resource_ids if rid not in found]
    if missing:  # unknown and unreadable look the same, so ids do not leak
        raise UnknownResourceError(missing)
    narrower = [rid for rid in resource_ids if not set(item_scopes) <= set(found[rid])]
    if narrower:
        raise ResourceScopeError(narrower, item_scopes)


def _insert_with_unique_id(item: Knowledge, knowledge_id: str | None, *, then: Callable[[], None]) -> None:
    """INSERT the item, then `then()` (what is stored with it), all or nothing: in one savepoint inside a caller's
    transaction, else in a transaction of its own. A taken id given by the caller is KnowledgeIdConflictError; a
    taken random id (rare) is drawn again, the suffix growing every few collisions so a crowded day cannot run out.

    A collision rolls that savepoint back (the INSERT was the first write in it), so the surrounding transaction
    stays usable, after a conflict too; one savepoint, not one for the item and another around its INSERT.
    """
    length = SUFFIX_LENGTH
    attempt = 0
    while True:
        item.id = knowledge_id or new_knowledge_id(now=item.created_at, suffix_length=length)
        try:
            with transaction.atomic():
                item.save(force_insert=True)
                then()
            return
        except IntegrityError as exc:
            if not _is_primary_key_violation(exc):
                raise
            if knowledge_id:
                raise KnowledgeIdConflictError(knowledge_id) from exc
            if length >= MAX_SUFFIX_LENGTH:
                raise
        attempt += 1
        if attempt % ID_ATTEMPTS_PER_LENGTH == 0:
            length += 1


def _is_primary_key_violation(exc: IntegrityError) -> bool:
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) == f"{Knowledge._meta.db_table}_pkey"


def readable_by(caller, knowledge_id: str | None) -> bool:
    """Whether `caller` may read the item `knowledge_id` (None: no caller to ask for, every item is named)."""
    return caller is None or not knowledge_id or Knowledge.objects.visible_to(caller).filter(pk=knowledge_id).exists()


def not_editable(knowledge_id: str, status: str, merged_into: str | None, *, caller=None) -> str:
    """Why an item's text cannot be changed (edit, evolve) in its `status`. The item it was merged into is named
    unless `caller` cannot read it (its scopes changed since the merge, which kept them equal)."""
    if status == KnowledgeStatus.MERGED:
        if not readable_by(caller, merged_into):
            return _("%(id)s was merged into another item: unmerge it first") % {"id": knowledge_id}
        return _("%(id)s was merged into %(into)s: change that item, or unmerge this one first") % {
            "id": knowledge_id, "into": merged_into}
    return _("%(id)s is %(status)s: make it active first") % {"id": knowledge_id, "status": status}


@transaction.atomic
def knowledge_edit(
    caller,
    *,
    knowledge_id: str,
    reason: str = "",
    task: str | None = None,
    content: str | None = None,
    tags: Mapping[str, str] | None = None,
    types: Iterable[str] | None = None,
    base_updated_at: datetime | None = None,
    job=None,
) -> Knowledge:
    """Change an item's text, tags or types, keeping the previous task/content/tags as a version.

    Raises Knowledge.DoesNotExist, or PermissionDenied unless `caller` may write one of its scopes (who may
    edit whose item is the operation's rule, `changeable_item`). The row lock serialises concurrent edits,
    so version numbers never collide. With `base_updated_at` (the `updated_at` the editor read) an edit of
    an item changed since is refused (KnowledgeStateError, 409 naming `base_updated_at`) instead of undoing
    that change; without it the last edit wins.
    """
    item = Knowledge.objects.select_for_update().get(pk=knowledge_id)
    require_write_any(caller, item)
    if item.status == KnowledgeStatus.MERGED:  # its text is what unmerging it brings back, as it was when merged
        raise KnowledgeStateError(not_editable(item.id, item.status, item.merged_into_id, caller=caller),
                                  field="knowledge_id")
    if base_updated_at is not None and item.updated_at != base_updated_at:
        # compared under the row lock: of two edits read from the same state, the second waits and is refused
        raise stale_edit(item, changed=_text_changed_since(item, base_updated_at))
    changes = {
        name: value for name, value in (("task", task), ("content", content), ("tags", None if tags is None else dict(tags)),
                                        ("types", None if types is None else list(dict.fromkeys(types))))
        if value is not None and value != getattr(item, name)
    }
    if not changes:
        return item
    if {"task", "content", "tags"} & set(changes):
        last = item.versions.order_by("-number").values_list("number", flat=True).first() or 0
        KnowledgeVersion.objects.create(
            knowledge=item, number=last + 1, task=item.task, content=item.content, tags=item.tags,
            changed_by=caller.principal, reason=reason, job=job,
        )
    for name, value in changes.items():
        setattr(item, name, value)
    item.updated_at = timezone.now()
    fields = [*changes, "updated_at"]
    if {"task", "content"} & set(changes):
        # the old vector describes the old text: keyword search finds the item until the worker re-embeds it
        item.embedding, item.embedding_model = None, ""
        fields += ["embedding", "embedding_model"]
        indexing.embed_with_this_write(knowledge_ids=[item.id])
    item.save(update_fields=fields)
    indexing.index_keywords(item=item)
    events.emit(events.KNOWLEDGE_UPDATED, scopes=item.scopes,
                data=events.knowledge_data(item, changed=sorted(changes), reason=reason[:200], by=caller.principal))
    return item


STALE_FIELD = "base_updated_at"


def stale_edit(item: Knowledge, *, changed: list[str]) -> KnowledgeStateError:
    """The refusal of an edit read from an older state of `item` (409), naming the precondition and what changed."""
    what = ", ".join(changed) if changed else _("its feedback, score, status or types")
    now = item.updated_at.isoformat().replace("+00:00", "Z")  # as GET's reply writes it
    return KnowledgeStateError(
        _("%(id)s changed since you opened it (%(what)s; updated_at is now %(now)s): read it again and redo your "
          "edit on the current text") % {"id": item.id, "what": what, "now": now},
        field=STALE_FIELD)


def _text_changed_since(item: Knowledge, moment: datetime) -> list[str]:
    """Which of task/content/tags differ from what they were at `moment`: the oldest version written after it
    holds the text as it was then. Empty when no text changed (feedback, the score, the status or types did)."""
    then = item.versions.filter(created_at__gt=moment).order_by("number").only("task", "content", "tags").first()
    if then is None:
        return []
    return [name for name in ("task", "content", "tags") if getattr(then, name) != getattr(item, name)]


def knowledge_restore_version(caller, *, knowledge_id: str, number: int) -> Knowledge:
    """Put a version's task/content/tags back; the text it replaces becomes a new version (nothing is lost).

    Raises KnowledgeVersion.DoesNotExist.
    """
    version = KnowledgeVersion.objects.get(knowledge_id=knowledge_id, number=number)
    return knowledge_edit(caller, knowledge_id=knowledge_id, reason=f"restored version {number}",
                          task=version.task, content=version.content, tags=version.tags)


# The status changes a person may make; merged items come back only through slim's unmerge.
STATUS_CHANGES = {Knowledge.Status.ARCHIVED: {Knowledge.Status.ACTIVE}, Knowledge.Status.ACTIVE: {Knowledge.Status.ARCHIVED}}


def lock_items(ids: Iterable[str]) -> dict[str, Knowledge]:
    """The items `ids` (those that exist), locked FOR UPDATE until the transaction ends, in id order: the order
    every writer of several items takes them in (merges, supersede, unmerge, conflicts, feedback batches), so two
    writers never each hold one and wait for the other's (PostgreSQL then rolls one back: a deadlock)."""
    return {k.id: k for k in Knowledge.objects.select_for_update().filter(pk__in=sorted(set(ids))).order_by("id")}


def require_write_any(caller, item: Knowledge) -> None:
    """PermissionDenied unless `caller` may write one of the item's scopes (a change to an existing item)."""
    if not caller.may_write_any(item.scopes):
        raise PermissionDenied(_("this caller may not write to any scope of %(id)s") % {"id": item.id})


@transaction.atomic
def knowledge_set_status(caller, *, knowledge_id: str, status: str) -> Knowledge:
    """Archive an active item, or make an archived one active again; rows are never deleted.

    Raises Knowledge.DoesNotExist, PermissionDenied unless `caller` may write one of its scopes, or
    KnowledgeStateError for any other change (a merged item).
    """
    item = Knowledge.objects.select_for_update().get(pk=knowledge_id)
    require_write_any(caller, item)
    if item.status == status:
        return item
    if item.status not in STATUS_CHANGES.get(status, ()):
        raise KnowledgeStateError(_("%(id)s is %(status)s; only active items are archived and archived ones "
                                    "made active (a merged item comes back through unmerge)")
                                  % {"id": item.id, "status": item.status}, field="status")
    item.status, item.updated_at = status, timezone.now()
    item.save(update_fields=["status", "updated_at"])
    kind = events.KNOWLEDGE_ARCHIVED if status == Knowledge.Status.ARCHIVED else events.KNOWLEDGE_UPDATED
    events.emit(kind, scopes=item.scopes, data=events.knowledge_data(item, changed=["status"], by=caller.principal))
    return item


TEXT_FIELDS = ("task", "content", "tags", "types")  # changed through knowledge_edit: a version, a new vector
PLAIN_FIELDS = ("message_id", "scopes", "owner", "source", "score", "confidence")  # changed in place


@transaction.atomic
def knowledge_change_fields(caller, *, knowledge_id: str, changes: Mapping, reason: str = "") -> Knowledge:
    """A curator's change of any editable field (the admin): text through `knowledge_edit`, so the old
    text is kept as a version and the item re-embedded; the other fields in place.

    Raises Knowledge.DoesNotExist; ValueError for a field that is not editable.
    """
    unknown = set(changes) - set(TEXT_FIELDS) - set(PLAIN_FIELDS)
    if unknown:
        raise ValueError(f"not editable: {', '.join(sorted(unknown))}")
    text = {name: changes[name] for name in TEXT_FIELDS if name in changes}
    if text:
        knowledge_edit(caller, knowledge_id=knowledge_id, reason=reason, **text)
    plain = {name: changes[name] for name in PLAIN_FIELDS if name in changes}
    if plain:
        Knowledge.objects.filter(pk=knowledge_id).update(**plain, updated_at=timezone.now())
    item = Knowledge.objects.get(pk=knowledge_id)
    if plain:
        events.emit(events.KNOWLEDGE_UPDATED, scopes=item.scopes,
                    data=events.knowledge_data(item, changed=sorted(plain), reason=reason[:200], by=caller.principal))
    return item

