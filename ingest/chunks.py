"""A document's chunks as knowledge items, kept in step when the document is read again.

Each item's `source.document` names where it came from: `{"kind", "uri", "content_hash", "chunk",
"chunk_hash"}` (the document's and the chunk's SHA-256). Reading a document again:

- unchanged document (same content hash): nothing is written;
- a chunk whose text is still in the document keeps its item (id, feedback, score), whatever its new position;
- a chunk whose text changed takes over the item that was at its position, as a new version (nothing lost);
- a chunk that is new becomes a new item; an item whose chunk is gone is archived (restorable).

Only who may change the existing items through the API (their owner, or a curator: `changeable_item`) may read
the document again; anyone else's reading is refused (`DocumentNotYours`) and changes nothing.
"""
import hashlib
from dataclasses import dataclass, field

from django.db import transaction
from django.http import Http404
from django.utils.translation import gettext as _
from rest_framework.exceptions import PermissionDenied

from core.errors import DomainError
from knowledge import services
from knowledge.limits import TASK_MAX
from knowledge.models import Knowledge, KnowledgeStatus
from knowledge.search import indexing

DOCUMENT = "document"
# Keys of `extra` that make a reading differ although the bytes did not (a new chunk size cuts other chunks).
UNCHANGED_KEYS = ("chunk_size", "chunk_overlap")


class DocumentNotYours(DomainError):
    """A reading of a document whose items the caller may not change (another's, and the caller no curator)."""

    status = 403
    code = "permission_denied"


def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


@dataclass
class ChunkOutcome:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    unchanged_document: bool = False
    by_chunk: dict[int, str] = field(default_factory=dict)  # chunk index -> the item holding it

    @property
    def item_ids(self) -> list[str]:
        """The document's items in the order of their chunks."""
        return [self.by_chunk[index] for index in sorted(self.by_chunk)]


def items_of(uri: str, kind: str, scopes: list[str] | None = None):
    """The items that came from the document at `uri` (into exactly `scopes`, when given: the same file name
    read into another team's scopes is another document)."""
    items = Knowledge.objects.filter(**{f"source__{DOCUMENT}__uri": uri, f"source__{DOCUMENT}__kind": kind})
    return items if scopes is None else items.filter(scopes=list(scopes))


def require_may_replace(caller, items, *, uri: str, scopes: list[str]) -> None:
    """DocumentNotYours, naming their owners, unless `caller` may change each of `items` (a document's) as the
    API lets it edit an item (`knowledge.operations.agents.changeable_item`: its owner, or a curator who may
    write one of its scopes)."""
    from knowledge.operations.agents import changeable_item

    refused, checked = set(), set()
    for item in items:
        if (item.owner, tuple(item.scopes)) in checked:  # the rule looks at the owner and the scopes only
            continue
        checked.add((item.owner, tuple(item.scopes)))
        try:
            changeable_item(caller, item.id)
        except (PermissionDenied, Http404):
            refused.add(item.owner)
    if refused:
        raise DocumentNotYours(
            _("%(uri)s in %(scopes)s was read before into items of %(owners)s: only their owner or a curator may "
              "read it again, and nothing was changed (upload it under another name or into other scopes)")
            % {"uri": uri, "scopes": ", ".join(scopes), "owners": ", ".join(sorted(refused))})


def lock_document(kind: str, uri: str, scopes: list[str]) -> None:
    """Serialise the readings of one document (two runs of a job, two uploads at once, two imports of one CSV file):
    until this transaction ends, another reading of the same document waits here, then sees what this one stored."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ["\x1f".join([kind, uri, *scopes])])


@transaction.atomic
def adopt_former_items(caller, *, kind: str, uri: str, former_uri: str, content_hash: str,
                       scopes: list[str]) -> list[str]:
    """Make the items read before under `former_uri`, an earlier name of document `uri`, its items, when `uri`
    has none yet and the former reading was of exactly these bytes (`content_hash`): the same file read again then
    changes nothing, as before its name changed (a zip's member is named by the zip and its path, once by its path
    alone). Items of a document upload (their `source.document` names its `document_id`) are never taken, nor a
    changed file's: the former name does not tell which file they came from. The ids taken."""
    scopes = sorted(set(scopes))
    lock_document(kind, former_uri, scopes)  # the former name first, then the new (apply_chunks), in every reading
    lock_document(kind, uri, scopes)
    if items_of(uri, kind, scopes).exists():
        return []
    former = list(items_of(former_uri, kind, scopes).exclude(**{f"source__{DOCUMENT}__has_key": "document_id"})
                  .select_for_update().order_by("id"))
    active = [k for k in former if k.status == KnowledgeStatus.ACTIVE]
    if not active or any(k.source[DOCUMENT].get("content_hash") != content_hash for k in active):
        return []
    require_may_replace(caller, former, uri=former_uri, scopes=scopes)
    for item in former:
        source = {**item.source, DOCUMENT: {**item.source[DOCUMENT], "uri": uri}}
        if source.get("name") == former_uri:
            source["name"] = uri
        Knowledge.objects.filter(pk=item.pk).update(source=source)
    return [k.id for k in former]


@transaction.atomic
def apply_chunks(caller, *, kind: str, uri: str, content_hash: str, chunks, scopes: list[str], types: list[str],
                 source_name: str = "", extra: dict | None = None, progress=None) -> ChunkOutcome:
    """Make the items of document `uri` match `chunks` (ingest.chunking.Chunk), as `caller`. `extra` goes into
    each item's `source.document`; it is part of what makes a reading "unchanged" (the chunk size, say).

    Raises DocumentNotYours, having changed nothing, unless `caller` may change every item the document has
    (`require_may_replace`)."""
    outcome = ChunkOutcome()
    scopes = sorted(set(scopes))
    lock_document(kind, uri, scopes)
    in_document = list(items_of(uri, kind, scopes).select_for_update().order_by("id"))  # locked in id order, as
    in_document.sort(key=lambda k: (k.created_at, k.id))  # every writer of several items takes them; then oldest first
    # an item slim merged away keeps its chunk: matched by its text it is neither re-created nor archived
    merged_hashes = {k.source[DOCUMENT].get("chunk_hash") for k in in_document if k.status == KnowledgeStatus.MERGED}
    existing = [k for k in in_document if k.status != KnowledgeStatus.MERGED]
    require_may_replace(caller, existing, uri=uri, scopes=scopes)  # what a merged item holds is never changed
    active = [k for k in existing if k.status == KnowledgeStatus.ACTIVE]
    settings = {key: value for key, value in (extra or {}).items() if key in UNCHANGED_KEYS}
    if active and all(k.source[DOCUMENT].get("content_hash") == content_hash
                      and all(k.source[DOCUMENT].get(key) == value for key, value in settings.items()) for k in active):
        outcome.unchanged_document = True
        outcome.kept = [k.id for k in sorted(active, key=lambda k: k.source[DOCUMENT].get("chunk", 0))]
        outcome.by_chunk = {k.source[DOCUMENT].get("chunk", n): k.id for n, k in enumerate(active)}
        return outcome
    by_hash: dict[str, list[Knowledge]] = {}
    for k in existing:  # identical chunks in one document: one item each, in order
        by_hash.setdefault(k.source[DOCUMENT].get("chunk_hash"), []).append(k)
    claimed: set[str] = set()
    pending = []  # chunks whose text is new: matched by position below
    for chunk in chunks:
        candidates = [k for k in by_hash.get(sha256(chunk.text), []) if k.id not in claimed]
        if candidates:
            item = candidates[0]
            claimed.add(item.id)
            if item.task != chunk.title[:TASK_MAX]:  # the text stayed, its section was renamed
                services.knowledge_edit(caller, knowledge_id=item.id, task=chunk.title[:TASK_MAX],
                                        reason=f"{uri}: its section's heading changed")
                item = Knowledge.objects.get(pk=item.id)
            _point(item, document=_document(kind, uri, content_hash, chunk, extra), active=True)
            outcome.kept.append(item.id)
            outcome.by_chunk[chunk.index] = item.id
        elif sha256(chunk.text) in merged_hashes:
            continue
        else:
            pending.append(chunk)
    by_position = {k.source[DOCUMENT].get("chunk"): k for k in existing if k.id not in claimed}
    for n, chunk in enumerate(pending):
        document = _document(kind, uri, content_hash, chunk, extra)
        item = by_position.get(chunk.index)
        if item is not None and item.id not in claimed:
            claimed.add(item.id)
            services.knowledge_edit(caller, knowledge_id=item.id, task=chunk.title[:TASK_MAX], content=chunk.text,
                                    reason=f"{uri} changed (chunk {chunk.index + 1})")
            _point(Knowledge.objects.get(pk=item.id), document=document, active=True)
            outcome.updated.append(item.id)
            outcome.by_chunk[chunk.index] = item.id
        else:
            created = services.knowledge_create(
                caller, task=chunk.title[:TASK_MAX], content=chunk.text, types=types, scopes=scopes, embed=False,
                source={"name": source_name or uri, "category": "document", DOCUMENT: document})
            outcome.created.append(created.id)
            outcome.by_chunk[chunk.index] = created.id
        if progress:
            progress(n + 1, len(pending))
    for item in existing:
        if item.id not in claimed and item.status == KnowledgeStatus.ACTIVE:
            services.knowledge_set_status(caller, knowledge_id=item.id, status=KnowledgeStatus.ARCHIVED)
            outcome.archived.append(item.id)
    if outcome.created:  # one embedding task per batch of new items, not one per item
        indexing.embed_with_this_write(knowledge_ids=list(outcome.created))
    return outcome


def _document(kind: str, uri: str, content_hash: str, chunk, extra: dict | None) -> dict:
    return {"kind": kind, "uri": uri, "content_hash": content_hash, "chunk": chunk.index,
            "chunk_hash": sha256(chunk.text), **(extra or {})}


def _point(item: Knowledge, *, document: dict, active: bool) -> None:
    """Record the item's (possibly new) place in the document; an archived item whose text came back is active."""
    changes = {"source": {**item.source, DOCUMENT: document}}
    if active and item.status == KnowledgeStatus.ARCHIVED:
        changes["status"] = KnowledgeStatus.ACTIVE
    Knowledge.objects.filter(pk=item.pk).update(**changes)
