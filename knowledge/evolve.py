"""Evolve: an LLM rewrites an item from feedback; the old text is kept as a version.

`evolve_request` (API) creates a Job and queues it; `evolve_run` (worker)
does the work and is safe to run twice: it claims the job only while it is
queued or running, and writes the new version, the item and the job's
success in one transaction, and only while its claim is the job's latest, so
a worker killed mid-job leaves nothing half written and the redelivered job
runs once to completion, even when the first copy still runs on somewhere.
"""
import hashlib

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.caller import Caller
from agents.requesters import RequesterGone, requester_writing
from jobs.models import Job
from jobs.services import job_annotate, job_claim, job_create, job_fail, job_holds_claim, job_succeed
from knowledge import llm, services
from knowledge.services import not_editable
from knowledge.errors import KnowledgeStateError
from knowledge.limits import CONTENT_MAX, TASK_MAX
from knowledge.models import Knowledge, KnowledgeVersion

RECENT_CASES = 10
EDITED_WHILE_WRITING = 2  # rewrites of a text edited meanwhile before the job gives up
SYSTEM = (
    "You maintain a knowledge base for AI agents. Rewrite the knowledge item so that it is more useful, "
    "taking the feedback and the reported cases into account. Keep what is right, fix what the feedback "
    "shows is wrong, stay concise. Answer in the language of the item."
)
SCHEMA = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "minLength": 1, "maxLength": TASK_MAX},
        "content": {"type": "string", "minLength": 1, "maxLength": CONTENT_MAX},
        "summary_of_changes": {"type": "string", "maxLength": 2000},
    },
    "required": ["task", "content", "summary_of_changes"],
    "additionalProperties": False,
}


def review_required(scopes) -> bool:
    """Evolve under review (settings.KNOWHUB_EVOLVE_REVIEW, or one of the item's scopes in
    KNOWHUB_EVOLVE_REVIEW_SCOPES): the rewrite waits as a proposal for a curator."""
    return settings.KNOWHUB_EVOLVE_REVIEW or bool(set(scopes) & set(settings.KNOWHUB_EVOLVE_REVIEW_SCOPES))


def evolve_request(caller, *, knowledge_id: str, feedback: str) -> Job:
    """Queue an evolve job for `caller`. Raises llm.LLMNotConfigured when there is no LLM to do it. Whether the
    rewrite goes live at once or waits for review is decided now, from the settings and the item's scopes."""
    if not llm.llm_configured():
        raise llm.LLMNotConfigured()

    scopes, status, merged_into = Knowledge.objects.filter(pk=knowledge_id).values_list(
        "scopes", "status", "merged_into").first() or ([], Knowledge.Status.ACTIVE, None)
    if status != Knowledge.Status.ACTIVE:  # a rewrite of an item no search returns; a merged one's text is its unmerge's
        raise KnowledgeStateError(not_editable(knowledge_id, status, merged_into, caller=caller), field="knowledge_id")
    return job_create(kind="evolve", subject=knowledge_id, requested_by=caller.principal,
                      params={"feedback": feedback, "model": settings.KNOWHUB_LLM_MODEL, "review": review_required(scopes),
                              "token_id": caller.token_id})


def _requester_refuses(job: Job, item: Knowledge) -> str | None:
    """Why the job's requester may no longer have the item rewritten (its token revoked or narrowed, its account
    disabled or read-only since the request: `agents.requesters.requester_writing`), or None."""
    try:
        requester_writing(job.requested_by, job.params.get("token_id"), item.scopes, every=False)
    except RequesterGone as exc:
        return exc.message
    return None


def _text_hash(task: str, content: str) -> str:
    return hashlib.sha256(f"{task}\x00{content}".encode()).hexdigest()


def _prompt(item: Knowledge, feedback: str) -> str:
    cases = list(item.feedback_cases.order_by("-id")[:RECENT_CASES])
    lines = [f"Task: {item.task}", f"Content: {item.content}", f"Types: {', '.join(item.types)}",
             f"Score: {item.score}, helpful {item.helpful}, harmful {item.harmful}", "", f"Feedback: {feedback}"]
    if cases:
        lines += ["", "Recent cases:"] + [f"- {c.kind}: {c.case}" for c in cases]
    return "\n".join(lines)


def _secrets_of(item: Knowledge) -> list[str]:
    from resources.selectors import secrets_of

    return secrets_of(item.resources.all())


def evolve_run(*, job_id: str, worker: str = "", task_id: str = "") -> Job:
    """Do the job as worker instance `worker`. Raises llm.LLMError (the task retries or fails the job).

    The rewrite goes live only if the item's text is still the one the LLM was given: an edit that landed while
    the LLM wrote (a curator's, an agent's) is never overwritten by a rewrite of the text before it. The job then
    rewrites the new text, EDITED_WHILE_WRITING times at most, and fails saying why if the item kept changing."""
    claimed = job_claim(job_id=job_id, worker=worker, task_id=task_id)
    job = Job.objects.get(pk=job_id)
    if not claimed:
        return job  # already finished: a redelivered message does nothing
    for _attempt in range(EDITED_WHILE_WRITING + 1):
        item = Knowledge.objects.get(pk=job.subject)
        if refused := _requester_refuses(job, item):
            job_fail(job_id=job.id, attempt=claimed, error=refused)
            return Job.objects.get(pk=job_id)
        based_on = _text_hash(item.task, item.content)
        reply = llm.chat_json(system=SYSTEM, user=_prompt(item, job.params["feedback"]), schema=SCHEMA,
                              schema_name="evolved_knowledge", secrets=_secrets_of(item))
        with transaction.atomic():
            if not job_holds_claim(job_id, claimed):
                return Job.objects.get(pk=job_id)  # finished, or re-sent and claimed again since: the later claim writes
            if job.params.get("review"):  # under review: the rewrite waits for a curator, the item is unchanged
                job_succeed(job_id=job.id, attempt=claimed, result={
                    "knowledge_id": item.id, "model": job.params.get("model"),
                    "summary_of_changes": reply["summary_of_changes"], "review": "pending",
                    "proposal": {"task": reply["task"], "content": reply["content"]}, "based_on": based_on})
                return Job.objects.get(pk=job_id)
            current = Knowledge.objects.select_for_update().only("task", "content", "status", "merged_into").get(pk=item.id)
            if current.status != Knowledge.Status.ACTIVE:  # archived, superseded or merged while the LLM wrote
                job_fail(job_id=job.id, attempt=claimed, error=not_editable(item.id, current.status, current.merged_into_id))
                return Job.objects.get(pk=job_id)
            if _text_hash(current.task, current.content) != based_on:
                continue  # edited while the LLM wrote: rewrite the text as it is now
            services.knowledge_edit(
                Caller.system(f"job:evolve:{job.id}"), knowledge_id=item.id, task=reply["task"], content=reply["content"],
                reason=f"evolve with {job.params.get('model')} ({job.params['feedback'][:200]}): {reply['summary_of_changes']}",
                job=job,
            )
            job_succeed(job_id=job.id, attempt=claimed, result={
                "knowledge_id": item.id, "model": job.params.get("model"), "summary_of_changes": reply["summary_of_changes"]})
            return Job.objects.get(pk=job_id)
    job_fail(job_id=job.id, attempt=claimed, error="the item was edited each time while its rewrite was being written: nothing was "
                                  "applied; evolve it again")
    return Job.objects.get(pk=job_id)


def evolve_fail(*, job_id: str, error: str) -> None:
    job_fail(job_id=job_id, error=error)


def evolve_outcome(job: Job) -> dict | None:
    """For a finished evolve job: the text before (its version) and after (the next version, or the current
    text), and whether it was rolled back; None for a job that changed nothing."""
    before = KnowledgeVersion.objects.filter(job=job).first()
    if job.status != Job.Status.SUCCEEDED or before is None:
        return None
    after = KnowledgeVersion.objects.filter(knowledge_id=before.knowledge_id, number=before.number + 1).first()
    after = after or before.knowledge
    rolled_back = KnowledgeVersion.objects.filter(knowledge_id=before.knowledge_id, number__gt=before.number,
                                                  reason=f"restored version {before.number}").exists()
    return {"before": before, "after": after, "rolled_back": rolled_back}


@transaction.atomic
def evolve_rollback(caller, *, job: Job) -> Knowledge:
    """Put back the task/content an evolve job replaced (the evolved text is kept as a new version), only while the
    item still has the text the job wrote: a rollback never reverts a later edit. KnowledgeStateError when the job
    changed nothing that could be rolled back, was rolled back already, or the item's text changed since (restore a
    version instead). The item is locked first (`services.lock_items`) and the job's outcome read once locked, so of
    two rollbacks of one job at once one puts the text back and the other is refused."""
    item = services.lock_items([job.subject]).get(job.subject) if job.kind == "evolve" and job.subject else None
    outcome = evolve_outcome(job) if item is not None else None
    if outcome is None:
        raise KnowledgeStateError("this job changed nothing that could be rolled back", field="job_id")
    if outcome["rolled_back"]:
        raise KnowledgeStateError("this job was rolled back already", field="job_id")
    written = outcome["after"]  # the text the job left: the next version's, or the item's when it is still current
    if (written.task, written.content) != (item.task, item.content):
        raise KnowledgeStateError("the item's text changed after this job rewrote it: restore a version instead",
                                  field="job_id")
    before = outcome["before"]
    # task and content only: evolve changes nothing else, so a later change of the tags stays
    return services.knowledge_edit(caller, knowledge_id=item.id, reason=f"restored version {before.number}",
                                   task=before.task, content=before.content)


def _pending_review(job: Job) -> dict:
    result = job.result or {}
    if job.kind != "evolve" or job.status != Job.Status.SUCCEEDED or result.get("review") != "pending":
        raise KnowledgeStateError("this job has no rewrite awaiting review", field="job_id")
    return result


@transaction.atomic
def evolve_accept(caller, *, job: Job) -> Knowledge:
    """A curator puts a reviewed rewrite live: the item's text becomes the proposal's, the old text a version
    linked to the job (so roll back works as for any evolve). KnowledgeStateError when nothing awaits review, or
    the item's text changed since the job read it (evolve it again)."""
    job = Job.objects.select_for_update().get(pk=job.pk)
    result = _pending_review(job)
    item = Knowledge.objects.select_for_update().get(pk=job.subject)
    if _text_hash(item.task, item.content) != result.get("based_on"):
        raise KnowledgeStateError("the item's text changed after this rewrite was proposed: reject it and evolve again",
                                  field="job_id")
    proposal = result["proposal"]
    services.knowledge_edit(
        caller, knowledge_id=item.id, task=proposal["task"], content=proposal["content"], job=job,
        reason=f"evolve with {job.params.get('model')} ({job.params['feedback'][:200]}), accepted by "
               f"{caller.principal}: {result.get('summary_of_changes', '')}")
    job_annotate(job_id=job.id, review="accepted", reviewed_by=caller.principal, reviewed_at=timezone.now().isoformat())
    return Knowledge.objects.get(pk=item.id)


@transaction.atomic
def evolve_reject(caller, *, job: Job) -> Job:
    """A curator turns a reviewed rewrite down: the item stays as it is; the proposal is kept in the job."""
    job = Job.objects.select_for_update().get(pk=job.pk)
    _pending_review(job)
    job_annotate(job_id=job.id, review="rejected", reviewed_by=caller.principal, reviewed_at=timezone.now().isoformat())
    return Job.objects.get(pk=job.pk)
