"""Search playground: a query as a chosen agent token sees it, both stages with their scores."""
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_safe

from agents.caller import Caller
from curation import permissions
from curation.forms import PlaygroundForm
from curation.labels import gate_reason
from knowledge.search import engine
from knowledge.search.filters import for_caller as filters_for_caller

TEMPLATE = "curation/playground.html"


def run_as_token(*, token, q, top_k, min_score, rank, types, scopes, filters) -> dict:
    """The same search the API runs for this token: its scopes, its static filters AND-ed with the given ones."""
    caller = Caller.for_token(token)
    result = engine.search(query=q, top_k=top_k, min_score=min_score, types=types or None, scopes=scopes or None,
                           filters=filters_for_caller(caller, filters), readable_scopes=caller.readable_scopes, rank=rank)
    kept = {hit.id: rank for rank, hit in enumerate(result.hits, start=1)}
    candidates = []
    for position, c in enumerate(result.candidates, start=1):
        fate = (_("kept, rank %(rank)s") % {"rank": kept[c.id]} if c.id in kept
                else _("left out: %(why)s") % {"why": gate_reason(c)})
        candidates.append({"position": position, "c": c, "item": result.items[c.id], "fate": fate, "kept": c.id in kept})
    hits = [{"rank": i, "hit": h, "item": result.items[h.id]} for i, h in enumerate(result.hits, start=1)]
    return {"caller": caller, "candidates": candidates, "hits": hits, "notes": result.notes,
            "answerable": result.answerable}


@permissions.require(permissions.VIEW)
@require_safe
def playground(request):
    form = PlaygroundForm(request.GET or None)
    context = {"form": form}
    status = 200
    if form.is_bound:
        if form.is_valid():
            context["run"] = run_as_token(**form.cleaned_data)
        else:
            status = 422
    template = f"{TEMPLATE}#stages" if request.htmx else TEMPLATE
    return render(request, template, context, status=status)
