"""Conflicts: close items found when one was saved (contradictions, refinements, duplicates, or pairs no LLM
judged), each beside the other, with the review actions; settled ones can be reopened (the action reversed)."""
from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.text import capfirst
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST, require_safe

from agents import operations
from curation import permissions
from curation.labels import label
from curation.views.common import caller_of, paginate, refusal_text
from knowledge.errors import KnowledgeStateError
from core.errors import DomainError
from knowledge.limits import CONTENT_MAX, TASK_MAX
from knowledge.models import Conflict
from knowledge.operations.conflicts import visible_conflicts

PAGE = "curation/conflicts.html"
STATUSES = [("open", gettext_lazy("Open")), *((s, capfirst(label(s))) for s in Conflict.Status.values if s != "open"),
            ("all", gettext_lazy("All"))]


def _row(conflict: Conflict, **extra) -> dict:
    proposal = next(iter(getattr(conflict, "pending", None) or []), None)  # prefetched by visible_conflicts
    newer, older = sorted([conflict.first, conflict.second], key=lambda k: (k.created_at, k.id), reverse=True)
    return {"conflict": conflict, "items": [older, newer], "newer": newer, "older": older, "proposal": proposal,
            "task_max": TASK_MAX, "content_max": CONTENT_MAX, **extra}


@permissions.require(permissions.VIEW)
@require_safe
def conflicts(request):
    status = request.GET.get("status", "open")
    if status not in dict(STATUSES):
        status = "open"
    found = visible_conflicts(caller_of(request)).order_by("-created_at", "-id")
    if status != "all":
        found = found.filter(status=status)
    page = paginate(found, request.GET.get("page"))
    return render(request, PAGE, {"page": page, "rows": [_row(c) for c in page], "status": status, "statuses": STATUSES,
                                  "open_count": visible_conflicts(caller_of(request)).filter(status="open").count()})


def _card(request, conflict_id, *, status=200, **extra):
    conflict = visible_conflicts(caller_of(request)).filter(pk=conflict_id).first()
    if conflict is None:
        raise Http404
    return render(request, f"{PAGE}#conflict", {"row": _row(conflict, **extra)}, status=status)


@permissions.require(permissions.CURATE)
@require_POST
def resolve(request, conflict_id):
    data = {"action": request.POST.get("action", "")}
    for name in ("successor_id", "task", "content"):
        if request.POST.get(name):
            data[name] = request.POST[name]
    try:
        operations.call("conflict_resolve", caller_of(request), conflict_id=conflict_id, data=data)
    except KnowledgeStateError as exc:
        return _card(request, conflict_id, status=409, error=exc.message)
    except DomainError as exc:  # refused input (an unknown action, a text over the limits): said on the card
        return _card(request, conflict_id, status=422, error=refusal_text(exc))
    return _card(request, conflict_id, done=True)


@permissions.require(permissions.CURATE)
@require_POST
def reopen(request, conflict_id):
    try:
        operations.call("conflict_reopen", caller_of(request), conflict_id=conflict_id)
    except KnowledgeStateError as exc:
        return _card(request, conflict_id, status=409, error=exc.message)
    return _card(request, conflict_id, reopened=True)


@permissions.require(permissions.CURATE)
@require_POST
def activate(request, knowledge_id):
    """A superseded (or archived) item made active again, from its page."""
    try:
        operations.call("knowledge_activate", caller_of(request), knowledge_id=knowledge_id, data={})
    except Http404:
        messages.error(request, _("No knowledge item %(id)s.") % {"id": knowledge_id})
        return redirect("curation:knowledge_list")
    except KnowledgeStateError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("%(id)s is active again: search finds it.") % {"id": knowledge_id})
    return redirect("curation:knowledge_detail", knowledge_id=knowledge_id)
