"""Knowledge list (live search, filters, sort, pages) and detail with inline edit, feedback and score."""
from django.db.models import Q
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from curation import permissions
from curation.browse import knowledge_browse
from curation.explain import explain_item
from curation.forms import EditForm, EvolveForm, FeedbackForm, KnowledgeFilterForm, ScoreForm
from agents import operations
from curation.views.common import REFUSALS, bounded_page, caller_of, paginate, refuse, render_parts
from jobs.selectors import jobs_about
from knowledge import selectors
from knowledge.errors import KnowledgeStateError
from knowledge.limits import QUERY_MAX
from knowledge.models import Conflict, FeedbackCase, Knowledge
from knowledge.services import STALE_FIELD

LIST = "curation/knowledge_list.html"
DETAIL = "curation/knowledge_detail.html"
REPORTS = "curation/knowledge_reports.html"
# An item's page shows the newest of its histories; the rest is a link away (an item may have thousands of reports).
REPORTS_SHOWN = 10
VERSIONS_SHOWN = 20
REPORTS_PER_PAGE = 50


@permissions.require(permissions.VIEW)
@require_safe
def knowledge_list(request):
    form = KnowledgeFilterForm(request.GET)
    page, browse = None, None
    if form.is_valid():
        data = form.cleaned_data
        browse = knowledge_browse(q=data["q"], types=data["types"], scopes=data["scopes"], tags=data["tags"],
                                  owner=data["owner"], status=data["status"], score_min=data["score_min"],
                                  score_max=data["score_max"], sort=data["sort"])
        page = bounded_page(browse.items, data["page"])
    context = {"form": form, "page": page, "browse": browse, "query": clean_query(request.GET, drop=("page",)),
               "scopes": selectors.known_scopes()}
    if not request.htmx:
        return render(request, LIST, context, status=200 if form.is_valid() else 422)
    response = render_parts(request, LIST, ["results", "filter-fields"], {**context, "oob": True},
                            status=200 if form.is_valid() else 422)
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
        return selectors.knowledge_get_shown(knowledge_id=knowledge_id)
    except Knowledge.DoesNotExist:
        raise Http404(f"no knowledge item {knowledge_id}") from None


def detail_context(item: Knowledge, *, all_versions: bool = False, **extra) -> dict:
    """What the item's page shows, in the same dozen queries however long its histories."""
    reports = selectors.feedback_newest(knowledge_id=item.id, per_kind=REPORTS_SHOWN)
    versions = selectors.versions_newest(knowledge_id=item.id, limit=None if all_versions else VERSIONS_SHOWN)
    return {
        "item": item,
        "helpful": reports["helpful"],
        "harmful": reports["harmful"],
        "resources": [link.resource for link in item.resource_links.select_related("resource")],
        "versions": versions.rows,
        "version_count": versions.total,
        "merged_from": list(item.merged_from.only("id", "task", "merged_into")),
        "supersedes": list(item.supersedes.only("id", "task", "superseded_by")),
        "conflicts": list(Conflict.objects.filter(Q(first=item) | Q(second=item), status=Conflict.Status.OPEN)
                          .select_related("first", "second")
                          .only("id", "kind", "first", "second", "first__task", "second__task")[:10]),
        "evolve_jobs": jobs_about(kind="evolve", subject=item.id),
        "evolve_form": EvolveForm(),
        **extra,
    }


@permissions.require(permissions.VIEW)
@require_safe
def knowledge_detail(request, knowledge_id):
    item = _item(knowledge_id)
    return render(request, DETAIL, detail_context(item, all_versions=request.GET.get("versions") == "all",
                                                  explain_query=request.GET.get("q") or item.task))


@permissions.require(permissions.VIEW)
@require_safe
def knowledge_reports(request, knowledge_id, kind):
    """Every helpful (or harmful) report on an item, newest first, a page at a time."""
    if kind not in FeedbackCase.Kind.values:
        raise Http404(f"no report kind {kind}")
    item = _item(knowledge_id)
    page = paginate(item.feedback_cases.filter(kind=kind).order_by("-id"), request.GET.get("page"),
                    per_page=REPORTS_PER_PAGE)
    return render(request, REPORTS, {"item": item, "kind": kind, "page": page})


@permissions.require(permissions.CURATE)
@require_http_methods(["GET", "POST"])
def knowledge_edit(request, knowledge_id):
    item = _item(knowledge_id)
    if request.method == "GET":
        return render(request, f"{DETAIL}#edit-form", {"item": item, "form": EditForm(initial=EditForm.initial_for(item))})
    form = EditForm(request.POST, item=item)
    if not form.is_valid():
        return render(request, f"{DETAIL}#edit-form", {"item": item, "form": form}, status=422)
    data = form.cleaned_data
    edit = {"reason": data["reason"] or "edited in the curation UI", "task": data["task"], "content": data["content"],
            "tags": data["tags"], "types": data["types"]}
    if data["base_updated_at"] is not None:
        edit["base_updated_at"] = data["base_updated_at"].isoformat()
    try:
        operations.call("knowledge_edit", caller_of(request), knowledge_id=item.id, data=edit)
    except REFUSALS as exc:  # what the form could not check: said in place
        if isinstance(exc, KnowledgeStateError) and exc.field == STALE_FIELD:
            return _stale_edit(request, item.id, form, exc)
        refuse(form, exc)
        status = 409 if isinstance(exc, KnowledgeStateError) else 422  # 409: the item is no longer editable
        return render(request, f"{DETAIL}#edit-form", {"item": item, "form": form}, status=status)
    context = detail_context(_item(item.id), oob=True, saved=True)
    return render_parts(request, DETAIL, ["content", "versions", "fields"], context)


def _stale_edit(request, knowledge_id: str, form: EditForm, exc: KnowledgeStateError) -> HttpResponse:
    """Someone saved the item after this form was opened: nothing was written. The form again, holding the current
    text (and its updated_at, the base of the next save), with the curator's own change beside it to redo; 409."""
    current = _item(knowledge_id)
    fresh = EditForm(initial=EditForm.initial_for(current), item=current)
    mine, now = form.cleaned_data, EditForm.initial_for(current)
    mine = {**mine, "tags": ", ".join(f"{k}={v}" for k, v in mine["tags"].items())}
    unsaved = [(form[name].label, mine[name]) for name in ("task", "content", "tags") if mine[name] != now[name]]
    if list(mine["types"]) != list(now["types"]):
        unsaved.append((form["types"].label, ", ".join(mine["types"])))
    return render(request, f"{DETAIL}#edit-form", {"item": current, "form": fresh, "stale": exc.message,
                                                   "unsaved": unsaved}, status=409)


def _feedback_panel(request, knowledge_id, form, *, form_name: str, record) -> HttpResponse:
    """Validate `form`, call `record(item, data)` and answer the feedback panel (422 with the errors in place)."""
    item = _item(knowledge_id)
    if not form.is_valid():
        return render(request, f"{DETAIL}#feedback", detail_context(item, **{form_name: form}), status=422)
    recorded = record(item, form.cleaned_data)
    return render(request, f"{DETAIL}#feedback", detail_context(_item(item.id), recorded=recorded))


@permissions.require(permissions.CURATE)
@require_POST
def knowledge_feedback(request, knowledge_id):
    def record(item, data):
        case = {"note": data["note"], "via": "curation UI"} if data["note"] else {"via": "curation UI"}
        operations.call("knowledge_update", caller_of(request), knowledge_id=item.id,
                        data={f"add_{data['kind']}_case": case})
        return data["kind"]

    return _feedback_panel(request, knowledge_id, FeedbackForm(request.POST), form_name="feedback_form", record=record)


@permissions.require(permissions.CURATE)
@require_POST
def knowledge_score(request, knowledge_id):
    def record(item, data):
        operations.call("knowledge_update", caller_of(request), knowledge_id=item.id,
                        data={"update_score": data["score"]})
        return "score"

    return _feedback_panel(request, knowledge_id, ScoreForm(request.POST), form_name="score_form", record=record)


@permissions.require(permissions.VIEW)
@require_safe
def knowledge_explain(request, knowledge_id):
    item = get_object_or_404(Knowledge, pk=knowledge_id)
    query = request.GET.get("q", "").strip()
    if not query:
        return render(request, f"{DETAIL}#explain", {"item": item, "explain_error": _("Type a query to explain.")}, status=422)
    if len(query) > QUERY_MAX:  # as an agent's search takes it: a longer one costs the engine seconds
        return render(request, f"{DETAIL}#explain", {"item": item, "explain_error": _(
            "A query has at most %(most)d characters.") % {"most": QUERY_MAX}}, status=422)
    return render(request, f"{DETAIL}#explain", {"item": item, "explain_query": query,
                                                 "explain": explain_item(item=item, query=query)})
