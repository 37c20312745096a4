"""Slim: merge near-duplicate knowledge, reversibly (seed 003).

Groups come from the neighbour search, never an all-pairs loop: each active
item's close items with the same set of scopes (so a merge never widens who can
see anything), as `knowledge.neighbours.close_pairs` finds them, asked for a
whole audience at once (`close_pairs_among`: a statement per writing system and
page of items, not several per item), and the pairs
marked `duplicate_likely` (at or above the measured duplicate threshold of the
pair's script pairing: a translation scores lower than a paraphrase) are
joined (union-find), unless a curator rejected that pair. Measured on
bench/data/pairs-dev (`python -m bench.duplicates`, BENCHMARKS.md
"Duplicates and contradictions (issue 17)"): pairwise precision and recall of
the groups against hand-labelled duplicates, paraphrases and EN/ZH translations.

Items of different owners may be grouped: the owner is the agent (or person)
that saved an item, so two agents saving the same advice always differ in
owner, and the former same-owner rule kept exactly those duplicates apart.
The audience is the scopes.

No similarity threshold keeps contradictions out (opposite advice in the same words scores as high as a
paraphrase: 3 of 23 contradictions reach the duplicate threshold on each half of the set), so a slim job
asks the LLM about every joined pair first (`relation.judge`, one call per pair) and groups only the pairs
it confirms as duplicates; the others are listed in the job's result as held back, with the reason.

For each group the LLM writes one merged task/content (structured output).
Everything else is merged by rule: union of types, tags (first wins on a
clash), resource ids and source urls; helpful/harmful summed and their
histories concatenated; score and confidence are the group's rounded mean.
The originals become `merged` with a pointer to the result; `knowledge_unmerge`
restores them and archives the merged item.
"""
import time
from collections.abc import Callable

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from agents.caller import Caller
from core import events
from jobs.models import Job
from jobs.services import ProgressWriter, job_claim, job_create, job_fail, job_progress, job_succeed
from core.safe_json import UNSAFE_CHARACTERS
from knowledge import llm, relation, services
from knowledge.limits import CONTENT_MAX, TASK_MAX
from knowledge.models import Conflict, FeedbackCase, Knowledge, KnowledgeStatus, MergeProposal, SlimRejection
from knowledge.neighbours import DUPLICATE_SAME_SCRIPT, NEIGHBOURS, close_pairs_among

SIMILARITY_THRESHOLD = DUPLICATE_SAME_SCRIPT  # kept for callers of the old name; see knowledge.neighbours
__all__ = ["NEIGHBOURS", "SIMILARITY_THRESHOLD", "find_groups", "group_pairs"]
SYSTEM = (
    "You merge near-duplicate items of a knowledge base for AI agents into one item that keeps every "
    "distinct, correct piece of advice and drops repetition. Answer in the language of the items."
)
SCHEMA = {
    "type": "object",
    "properties": {"task": {"type": "string", "minLength": 1, "maxLength": TASK_MAX},
                   "content": {"type": "string", "minLength": 1, "maxLength": CONTENT_MAX}},
    "required": ["task", "content"],
    "additionalProperties": False,
}


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def find_groups(*, writable_scopes: list[str] | None = None, threshold: float | None = None) -> list[list[str]]:
    """Groups of active items to merge, each sorted, ordered by their first id.

    By default the pairs `close_pairs` marks `duplicate_likely` are joined; with `threshold`, its candidate
    pairs whose similarity reaches that number, whatever their scripts.
    """
    edges, rejected = duplicate_edges(writable_scopes=writable_scopes, threshold=threshold)
    return group_pairs(edges, rejected=rejected)


def duplicate_edges(*, writable_scopes: list[str] | None = None, threshold: float | None = None,
                    each_page: Callable[[], None] | None = None):
    """The pairs find_groups joins, and the rejected pairs it keeps apart (`each_page`: close_pairs_among's)."""
    active = Knowledge.objects.filter(status=KnowledgeStatus.ACTIVE, embedding_model=settings.KNOWHUB_EMBEDDING_MODEL)
    if writable_scopes is not None:
        active = active.filter(scopes__contained_by=list(writable_scopes))
    rejected = {_pair(a, b) for a, b in SlimRejection.objects.values_list("first_id", "second_id")}
    audiences = sorted({tuple(sorted(set(scopes))) for scopes in active.values_list("scopes", flat=True)})
    edges = []
    for audience in audiences:
        same_audience = active.filter(scopes__contains=list(audience), scopes__contained_by=list(audience))
        for item_id, pairs in sorted(close_pairs_among(same_audience, each_page=each_page).items()):
            for pair in pairs:
                if pair.duplicate_likely if threshold is None else pair.similarity >= threshold:
                    edges.append(_pair(item_id, pair.other_id))
    return list(dict.fromkeys(edges)), rejected


def checked_groups(edges, *, rejected, model: str | None,
                   checked: Callable[[int, int], None] | None = None) -> tuple[list[list[str]], list[dict]]:
    """Groups from only the pairs the LLM confirms are duplicates (`relation.judge`, one call per pair): two items
    that look alike but refine or contradict each other are never merged. Returns the groups and the pairs held
    back (with the LLM's relation and explanation, or the error that kept it from answering). `checked(pairs
    checked, pairs held back)` is called after each pair."""
    items = Knowledge.objects.in_bulk({i for edge in edges for i in edge})
    confirmed, held_back = [], []
    for a, b in edges:
        try:
            verdict = relation.judge(items[a], items[b], model=model)
        except llm.LLMError as exc:
            held_back.append({"ids": [a, b], "relation": None, "error": UNSAFE_CHARACTERS.sub("\ufffd", str(exc)[:300])})
        else:
            if verdict["relation"] == "duplicate":
                confirmed.append((a, b))
            else:
                held_back.append({"ids": [a, b], "relation": verdict["relation"],
                                  "explanation": verdict["explanation"][:500]})
        if checked:
            checked(len(confirmed) + len(held_back), len(held_back))
    return group_pairs(confirmed, rejected=rejected), held_back


GROUP_MAX = 50  # items in one group: what a curator may approve or reject at once (and a proposal's index can hold)


def group_pairs(edges, *, rejected: set[tuple[str, str]] = frozenset(), most: int = GROUP_MAX) -> list[list[str]]:
    """Union-find over `edges` (pairs of ids), never putting a rejected pair in one group, even through a third item,
    nor more than `most` items in one (400 copies of one lesson made one group no curator could approve, and whose
    proposal the database could not store: its ids outgrew the unique index's row): the rest form further groups."""
    parent: dict[str, str] = {}
    members: dict[str, set[str]] = {}

    def root(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    def join(a, b):
        ra, rb = root(a), root(b)
        if ra == rb:
            return
        group_a, group_b = members.get(ra, {ra}), members.get(rb, {rb})
        if len(group_a) + len(group_b) > most:
            return
        if any(_pair(x, y) in rejected for x in group_a for y in group_b):
            return
        parent[rb] = ra
        members[ra] = group_a | group_b
        members.pop(rb, None)

    for a, b in edges:
        join(a, b)
    groups = {}
    for x in list(parent):
        groups.setdefault(root(x), []).append(x)
    return sorted((sorted(g) for g in groups.values() if len(g) > 1), key=lambda g: g[0])


def propose_merge(items: list[Knowledge], *, model: str | None) -> dict:
    listing = "\n\n".join(f"Item {i + 1}\nTask: {k.task}\nContent: {k.content}" for i, k in enumerate(items))
    from resources.selectors import secrets_of

    secrets = secrets_of(r for k in items for r in k.resources.all())
    # SCHEMA's maxLength holds the reply to what an item stores: chat_json validates every reply against it
    return llm.chat_json(system=SYSTEM, user=f"Merge these items into one:\n\n{listing}", schema=SCHEMA,
                         schema_name="merged_knowledge", model=model, secrets=secrets)


def text_too_long(text: dict) -> str | None:
    """Why a merged task/content cannot be stored (longer than TASK_MAX / CONTENT_MAX, as any item's), or None."""
    for field, limit in (("task", TASK_MAX), ("content", CONTENT_MAX)):
        if len(text.get(field) or "") > limit:
            return f"the {field} is {len(text[field])} characters, more than {limit}"
    return None


def scopes_differ(items) -> str | None:
    """Why `items` cannot be merged for their scopes (a merged item and its originals have one set), or None."""
    if len({frozenset(k.scopes) for k in items}) > 1:
        return (_("the items are in different scopes (%(scopes)s): give them the same scopes before merging")
                % {"scopes": "; ".join(sorted({", ".join(sorted(k.scopes)) for k in items}))})
    return None


@transaction.atomic
def merge_group(caller, ids: list[str], *, text: dict) -> Knowledge:
    """Merge the active items `ids` into a new item with `text`, as `caller`; the originals are kept, merged.
    ValueError when the text is too long (`text_too_long`), an item is no longer active or the items' scopes differ:
    nothing is merged."""
    if problem := text_too_long(text):  # a proposal stored before the limits, approved as it is
        raise ValueError(problem)
    items = sorted((k for k in services.lock_items(ids).values() if k.status == KnowledgeStatus.ACTIVE),
                   key=lambda k: (k.created_at, k.id))  # locked in id order (lock_items), merged oldest first
    if len(items) != len(ids):
        raise ValueError(_("some items of the group are no longer active"))
    # The merged item takes one set of scopes: of items in different scopes, one's readers would read the other's
    # text, tags, sources and reports, and the other's would lose it. Slim and merge proposals group equal scopes
    # only; a curator naming any ids is told to give the items the same scopes first.
    if problem := scopes_differ(items):
        raise ValueError(problem)
    tags, resource_ids, urls, types = {}, [], [], []
    for k in items:
        for key, value in k.tags.items():
            tags.setdefault(key, value)
        resource_ids += k.resource_ids
        urls += k.source.get("urls", [])
        types += k.types
    cases = list(FeedbackCase.objects.filter(knowledge__in=items).order_by("created_at", "id"))
    merged = services.knowledge_create(
        caller,
        task=text["task"], content=text["content"], types=types, scopes=items[0].scopes, owner=items[0].owner,
        tags=tags, resource_ids=resource_ids,
        source={"name": "slim merge", "category": "merge", "urls": list(dict.fromkeys(urls)), "submitted_by": caller.principal},
        score=round(sum(k.score for k in items) / len(items)),
        confidence=round(sum(k.confidence for k in items) / len(items), 3),
        helpful=sum(k.helpful for k in items), harmful=sum(k.harmful for k in items),
        helpful_history=[c.case for c in cases if c.kind == "helpful"],
        harmful_history=[c.case for c in cases if c.kind == "harmful"],
    )
    Knowledge.objects.filter(pk__in=ids).update(status=KnowledgeStatus.MERGED, merged_into=merged, updated_at=timezone.now())
    # an open conflict between items of the group is settled by this merge (a slim job's, a reviewed proposal's, a
    # conflict's own: keeping both of two merged items would contradict it), unless a person settled it already
    Conflict.objects.filter(status=Conflict.Status.OPEN, first_id__in=ids, second_id__in=ids).update(
        status=Conflict.Status.MERGED, resolution={"merged_id": merged.id}, resolved_by=caller.principal,
        resolved_at=timezone.now(), updated_at=timezone.now())
    events.emit(events.KNOWLEDGE_MERGED, scopes=merged.scopes,
                data=events.knowledge_data(merged, merged_ids=[k.id for k in items], by=caller.principal))
    return merged


def merge_and_originals(merged_id: str) -> list[str]:
    """The ids of a merged item and of its originals: what undoing the merge locks (`services.lock_items`)."""
    return [merged_id, *Knowledge.objects.filter(merged_into_id=merged_id).values_list("id", flat=True)]


@transaction.atomic
def knowledge_unmerge(caller, *, merged_id: str) -> list[str]:
    """Restore the originals of a merged item and archive it. Returns the restored ids. PermissionDenied unless
    `caller` may write one of its scopes."""
    locked = services.lock_items(merge_and_originals(merged_id))
    if merged_id not in locked:
        raise Knowledge.DoesNotExist(merged_id)
    merged = locked[merged_id]
    services.require_write_any(caller, merged)
    originals = [item_id for item_id, item in locked.items() if item.merged_into_id == merged_id]  # read once locked
    if not originals:
        raise ValueError(_("%(id)s is not the result of a merge") % {"id": merged_id})
    if merged.status == KnowledgeStatus.MERGED:  # merged again since: only undoing that merge may change it
        if not services.readable_by(caller, merged.merged_into_id):  # its scopes changed since: say no more
            raise ValueError(_("%(id)s was merged into another item since: it cannot be unmerged") % {"id": merged_id})
        raise ValueError(_("%(id)s was merged into %(into)s since: unmerge %(into)s first")
                         % {"id": merged_id, "into": merged.merged_into_id})
    Knowledge.objects.filter(pk__in=originals).update(status=KnowledgeStatus.ACTIVE, merged_into=None, updated_at=timezone.now())
    Knowledge.objects.filter(pk=merged.pk).update(status=KnowledgeStatus.ARCHIVED, updated_at=timezone.now())
    merged.status = KnowledgeStatus.ARCHIVED
    # a conflict settled by this merge is open again: its pair is back, for a person to judge
    Conflict.objects.filter(status=Conflict.Status.MERGED, resolution__merged_id=merged_id).update(
        status=Conflict.Status.OPEN, resolution={}, resolved_by="", resolved_at=None, updated_at=timezone.now())
    events.emit(events.KNOWLEDGE_ARCHIVED, scopes=merged.scopes,
                data=events.knowledge_data(merged, restored_ids=originals, by=caller.principal))
    return originals


@transaction.atomic
def slim_approve(caller, *, ids: list[str], task: str, content: str) -> Knowledge:
    """A curator merges a group, with the pending proposal's text (`approved`) or their own (`edited`); a group
    with no proposal is recorded as an edited one, so every merge a person made has its record."""
    ids = sorted(set(ids))
    merged = merge_group(caller, ids, text={"task": task, "content": content})
    proposal = MergeProposal.objects.select_for_update().filter(ids=ids, status=MergeProposal.Status.PENDING).first()
    if proposal is None:  # the curator's own text: nothing was proposed
        proposal = MergeProposal(ids=ids, task=task, content=content, status=MergeProposal.Status.EDITED)
    else:
        proposal.status = (MergeProposal.Status.APPROVED if (proposal.task, proposal.content) == (task, content)
                           else MergeProposal.Status.EDITED)  # the proposal's text stays as proposed
    proposal.merged_id, proposal.decided_by, proposal.decided_at = merged.id, caller.principal, timezone.now()
    proposal.save()
    return merged


def store_proposal(ids: list[str], text: dict, *, job_id=None, conflict=None) -> MergeProposal:
    """The pending proposal for a group: stored once; proposing the same group again updates its text."""
    ids = sorted(set(ids))
    defaults = {"task": text.get("task", ""), "content": text.get("content", ""), "job_id": job_id, "conflict": conflict}
    try:
        with transaction.atomic():
            proposal, created = MergeProposal.objects.get_or_create(ids=ids, status=MergeProposal.Status.PENDING,
                                                                    defaults=defaults)
    except IntegrityError:  # proposed at the same moment by another worker (a slim job and a detection)
        proposal, created = MergeProposal.objects.get(ids=ids, status=MergeProposal.Status.PENDING), False
    if not created:
        MergeProposal.objects.filter(pk=proposal.pk).update(
            task=text.get("task", ""), content=text.get("content", ""), job_id=job_id or proposal.job_id,
            conflict=conflict or proposal.conflict)
        proposal.refresh_from_db()
    return proposal


def slim_reject(caller, *, first_id: str, second_id: str) -> None:
    a, b = _pair(first_id, second_id)
    SlimRejection.objects.get_or_create(first_id=a, second_id=b, defaults={"rejected_by": caller.principal})


def slim_request(caller, *, model: str | None, dry_run: bool) -> Job:
    """Queue a slim job over the scopes `caller` may write. Raises llm.LLMNotConfigured without an LLM."""
    if not llm.llm_configured():
        raise llm.LLMNotConfigured()

    writable_scopes = None if caller.writable_scopes is None else list(caller.writable_scopes)
    return job_create(kind="slim", requested_by=caller.principal, progress={"groups_found": 0, "merged": 0, "failed": 0},
                      params={"model": model, "dry_run": dry_run, "writable_scopes": writable_scopes})


PROGRESS_EVERY_SECONDS = 1.0  # while the pairs are checked: at most one progress write a second


class ClaimLost(Exception):
    """The job finished or was claimed by another message while this run checked its pairs."""


class TimeLimitReached(Exception):
    """The run went past KNOWHUB_SLIM_TIME_LIMIT_SECONDS."""


def _deadline_check(seconds: int) -> Callable[[], None]:
    """A check that raises TimeLimitReached once `seconds` have passed (0: never). A deadline the run checks itself,
    not Celery's soft time limit: that one's exception, raised inside an LLM call, is caught by the openai client,
    retried and turned into a failed call, and slim would go on to the hard limit's kill and a redelivery."""
    if seconds <= 0:
        return lambda: None
    deadline = time.monotonic() + seconds

    def check() -> None:
        if time.monotonic() > deadline:
            raise TimeLimitReached()
    return check


def _stopped_message(seconds: int, progress: dict, edges: int) -> str:
    counts = {"seconds": f"{seconds:,}", "checked": f"{progress.get('pairs_checked', 0):,}", "pairs": f"{edges:,}"}
    if not progress:  # stopped while the candidate pairs were looked for
        return _("stopped at the time limit (KNOWHUB_SLIM_TIME_LIMIT_SECONDS, %(seconds)s s) while looking for "
                 "near-duplicate pairs: nothing was changed; run slim with a higher limit") % counts
    if "groups_found" not in progress:  # stopped while the pairs were checked: nothing merged yet
        return _("stopped at the time limit (KNOWHUB_SLIM_TIME_LIMIT_SECONDS, %(seconds)s s) after checking "
                 "%(checked)s of %(pairs)s pairs, before merging: nothing was changed; run slim again (or with a "
                 "higher limit) to go on") % counts
    return _("stopped at the time limit (KNOWHUB_SLIM_TIME_LIMIT_SECONDS, %(seconds)s s) after checking %(checked)s "
             "of %(pairs)s pairs and settling %(settled)s of %(groups)s groups (%(merged)s merged, %(proposed)s "
             "proposed): those stay; run slim again to go on") % {
        **counts, "settled": progress["merged"] + progress["proposed"] + progress["failed"],
        "groups": progress["groups_found"], "merged": progress["merged"], "proposed": progress["proposed"]}


def slim_run(*, job_id: str, worker: str = "", task_id: str = "") -> Job:
    """Safe to run again: merged groups are no longer active, so they are not found twice. Bounded in time
    (KNOWHUB_SLIM_TIME_LIMIT_SECONDS): past it the job fails saying how far it got, and what it merged stays."""
    claimed = job_claim(job_id=job_id, worker=worker, task_id=task_id)
    job = Job.objects.get(pk=job_id)
    if not claimed:
        return job
    limit = settings.KNOWHUB_SLIM_TIME_LIMIT_SECONDS
    in_time = _deadline_check(limit)
    params = job.params
    writer = ProgressWriter(job_id=job_id, attempt=claimed, every=PROGRESS_EVERY_SECONDS)
    progress, edges = {}, []  # how far it got: its keys say which stage (_stopped_message)

    def checked(pairs: int, held: int) -> None:  # one LLM call a pair, seconds each: say how far it got
        progress.update(pairs_checked=pairs, held_back=held)
        if not writer.write(dict(progress)):
            raise ClaimLost(job_id)  # finished or claimed again since: the later claim does the work
        in_time()

    try:
        edges, rejected = duplicate_edges(writable_scopes=params.get("writable_scopes"), each_page=in_time)
        progress = {"pairs_to_check": len(edges), "pairs_checked": 0, "held_back": 0}
        writer.write(progress, last=True)
        in_time()
        groups, held_back = checked_groups(edges, rejected=rejected, model=params.get("model"), checked=checked)
        progress = {"pairs_checked": len(edges), "held_back": len(held_back), "groups_found": len(groups),
                    "merged": 0, "proposed": 0, "failed": 0}
        job_progress(job_id=job_id, progress=progress, attempt=claimed)
        outcomes = []
        for ids in groups:
            in_time()
            items = list(Knowledge.objects.filter(pk__in=ids).order_by("created_at", "id"))
            try:
                text = propose_merge(items, model=params.get("model"))
                if params.get("dry_run"):
                    proposal = store_proposal(ids, text, job_id=job.id)
                    outcomes.append({"ids": ids, "proposal": text, "proposal_id": proposal.id})
                    progress["proposed"] += 1
                else:
                    merged = merge_group(Caller.system(f"job:slim:{job_id}"), ids, text=text)
                    outcomes.append({"ids": ids, "merged_id": merged.id})
                    progress["merged"] += 1
            except (llm.LLMError, ValueError) as exc:
                outcomes.append({"ids": ids, "error": str(exc)[:500]})
                progress["failed"] += 1
            job_progress(job_id=job_id, progress=progress, attempt=claimed)
    except ClaimLost:
        return Job.objects.get(pk=job_id)
    except TimeLimitReached:
        if progress:
            job_progress(job_id=job_id, progress=progress, attempt=claimed)
        job_fail(job_id=job_id, error=_stopped_message(limit, progress, len(edges)), attempt=claimed)
        return Job.objects.get(pk=job_id)
    job_succeed(job_id=job_id, attempt=claimed, result={"groups": outcomes, "held_back": held_back})
    return Job.objects.get(pk=job_id)


def slim_proposals_pending() -> list[MergeProposal]:
    """Pending merge proposals, newest first, whose items are all still active and none of whose pairs
    was rejected since (a group settled some other way is left out, not deleted)."""
    rejected = {_pair(a, b) for a, b in SlimRejection.objects.values_list("first_id", "second_id")}
    proposals = [p for p in MergeProposal.objects.filter(status=MergeProposal.Status.PENDING).order_by("-created_at", "-id")
                 if not any(_pair(a, b) in rejected for i, a in enumerate(p.ids) for b in p.ids[i + 1:])]
    active = set(Knowledge.objects.filter(pk__in={i for p in proposals for i in p.ids}, status=KnowledgeStatus.ACTIVE)
                 .values_list("id", flat=True))
    return [p for p in proposals if set(p.ids) <= active]


@transaction.atomic
def slim_reject_group(caller, *, ids: list[str]) -> None:
    """Reject a whole proposed group: none of its pairs is proposed again, and its proposal is `rejected`."""
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            slim_reject(caller, first_id=a, second_id=b)
    MergeProposal.objects.filter(ids=sorted(set(ids)), status=MergeProposal.Status.PENDING).update(
        status=MergeProposal.Status.REJECTED, decided_by=caller.principal, decided_at=timezone.now())
