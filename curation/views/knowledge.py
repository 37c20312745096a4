"""Knowledge list (live search, filters, sort, pages) and detail with inline edit, feedback and score."""
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from curation import permissions
from curation.browse import knowledge_browse, known_scopes
from curation.explain import explain_item
from curation.forms import EditForm, FeedbackForm, KnowledgeFilterForm, ScoreForm, EvolveForm
from curation.views.common import paginate, principal, render_parts
from knowledge import feedback, selectors, services
from knowledge.models import Knowledge

LIST = "curation/knowledge_list.html"
DETAIL = "curation/knowledge_detail.html"


@permissions.require(permissions.VIEW)
@require_GET
def knowledge_list(request):
    form = KnowledgeFilterForm(request.GET)
    page, browse = None, None
    if form.is_valid():
        data = form.cleaned_data
        browse = knowledge_browse(q=data["q"], types=data["types"], scopes=data["scopes"], tags=data["tags"],
                                  owner=data["owner"], status=data["status"], score_min=data["score_min"],
                                  score_max=data["score_max"], sort=data["sort"])
        page = paginate(browse.items, data["page"])
    context = {"form": form, "page": page, "browse": browse, "query": clean_query(request.GET, drop=("page",)),
               "scopes": known_scopes()}
    if not request.htmx:
        return render(request, LIST, context, status=200 if form.is_valid() else 422)
    response = render(request, f"{LIST}#results", context, status=200 if form.is_valid() else 422)
    query = clean_query(request.GET)
    response["HX-Push-Url"] = f"{request.path}?{query}" if query else request.path  # a short URL to bookmark
    return response


def clean_query(params, *, drop=()) -> str:
    """The query string without empty parameters (and without `drop`)."""
    query = params.copy()
    for key in list(query):
        values = [v for v in query.getlist(key) if v.strip()]
        if key in drop or not values:
            query.pop(key)
        else:
            query.setlist(key, values)
    return query.urlencode()


def _item(knowledge_id: str) -> Knowledge:
    try:
        return selectors.knowledge_get(knowledge_id=knowledge_id)
    except Knowledge.DoesNotExist:
        from django.http import Http404

        raise Http404(f"no knowledge item {knowledge_id}") from None


def detail_context(item: Knowledge, **extra) -> dict:
    cases = list(item.feedback_cases.all())
    return {
        "item": item,
        "helpful_cases": [c for c in cases if c.kind == "helpful"],
        "harmful_cases": [c for c in cases if c.kind == "harmful"],
        "resources": [link.resource for link in item.resource_links.select_related("resource")],
        "versions": list(item.versions.all()),
        "merged_from": list(item.merged_from.all()),
        "evolve_jobs": list(item.jobs.filter(kind="evolve")[:5]),
        "evolve_form": EvolveForm(),
        **extra,
    }


@permissions.require(permissions.VIEW)
@require_GET
def knowledge_detail(request, knowledge_id):
    item = _item(knowledge_id)
    return render(request, DETAIL, detail_context(item, explain_query=request.GET.get("q") or item.task))


@permissions.require(permissions.CURATE)
def knowledge_edit(request, knowledge_id):
    item = _item(knowledge_id)
    if request.method == "GET":
        return render(request, f"{DETAIL}#edit-form", {"item": item, "form": EditForm(initial=EditForm.initial_for(item))})
    if request.method != "POST":
        from django.http import HttpResponseNotAllowed

        return HttpResponseNotAllowed(["GET", "POST"])
    form = EditForm(request.POST)
    if not form.is_valid():
        return render(request, f"{DETAIL}#edit-form", {"item": item, "form": form}, status=422)
    data = form.cleaned_data
    services.knowledge_edit(knowledge_id=item.id, changed_by=principal(request), reason=data["reason"] or "edited in the curation UI",
                            task=data["task"], content=data["content"], tags=data["tags"], types=data["types"])
    context = detail_context(_item(item.id), oob=True, saved=True)
    return render_parts(request, DETAIL, ["content", "versions"], context)


@permissions.require(permissions.CURATE)
@require_POST
def knowledge_feedback(request, knowledge_id):
    item = _item(knowledge_id)
    form = FeedbackForm(request.POST)
    if not form.is_valid():
        return render(request, f"{DETAIL}#feedback", detail_context(item, feedback_form=form), status=422)
    note = form.cleaned_data["note"]
    feedback.feedback_record(knowledge_id=item.id, helpful=form.cleaned_data["kind"] == "helpful",
                             case={"note": note, "via": "curation UI"} if note else {"via": "curation UI"},
                             reported_by=principal(request))
    return render(request, f"{DETAIL}#feedback", detail_context(_item(item.id), recorded=form.cleaned_data["kind"]))


@permissions.require(permissions.CURATE)
@require_POST
def knowledge_score(request, knowledge_id):
    item = _item(knowledge_id)
    form = ScoreForm(request.POST)
    if not form.is_valid():
        return render(request, f"{DETAIL}#feedback", detail_context(item, score_form=form), status=422)
    feedback.score_set(knowledge_id=item.id, score=form.cleaned_data["score"])
    return render(request, f"{DETAIL}#feedback", detail_context(_item(item.id), recorded="score"))


@permissions.require(permissions.VIEW)
@require_GET
def knowledge_explain(request, knowledge_id):
    item = get_object_or_404(Knowledge, pk=knowledge_id)
    query = request.GET.get("q", "").strip()
    if not query:
        return render(request, f"{DETAIL}#explain", {"item": item, "explain_error": "Type a query to explain."}, status=422)
    return render(request, f"{DETAIL}#explain", {"item": item, "explain_query": query,
                                                 "explain": explain_item(item=item, query=query)})
