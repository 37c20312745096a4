"""Documents: upload a file or a URL to be read into knowledge items, follow it while it is read; import a file
(an export, CSV, Markdown, zip) by a job, follow it and see its report; link to the export. The views call the
registered operations, as the API does."""
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from agents import operations
from curation import permissions
from curation.forms import DocumentForm, ImportForm
from curation.views.common import PAGE_SIZE, REFUSALS, caller_of, refuse, render_parts
from ingest.inputs import OFFSET_MAX
from ingest.models import Document
from knowledge.models import Knowledge
from knowledge.selectors import known_scopes

DOCUMENTS = "curation/documents.html"
DETAIL = "curation/document_detail.html"
STATUSES = [s for s, _ in Document.Status.choices]
ACTIVE = (Document.Status.QUEUED, Document.Status.PROCESSING)  # a panel or list showing one polls


def document_page(request) -> dict:
    """One page of the documents the person may read (the document_list operation's limit and offset)."""
    status = request.GET.get("status") if request.GET.get("status") in STATUSES else ""
    try:  # within the document_list operation's furthest offset
        number = min(max(1, int(request.GET.get("page") or 1)), OFFSET_MAX // PAGE_SIZE + 1)
    except ValueError:
        number = 1
    data = {"limit": PAGE_SIZE, "offset": (number - 1) * PAGE_SIZE, **({"status": status} if status else {})}
    found = operations.call("document_list", caller_of(request), data=data)
    pages = max(1, -(-found["count"] // PAGE_SIZE))
    return {"documents": found["results"], "count": found["count"], "status": status, "statuses": STATUSES,
            "page": {"number": number, "num_pages": pages, "has_previous": number > 1,
                     "has_next": found["next_offset"] is not None},
            "active": any(d.status in ACTIVE for d in found["results"])}


def panel_context(document: Document) -> dict:
    """One document's status panel: polling while it is queued or being read, then the items it became."""
    found = Knowledge.objects.in_bulk(document.items)
    return {"document": document, "polling": document.status in ACTIVE,
            "document_items": [found[i] for i in document.items if i in found]}


def page_context(request, **extra) -> dict:
    context = {**document_page(request), "scopes": known_scopes(), **extra}
    if request.user.has_perm(permissions.CURATE):
        context.setdefault("form", DocumentForm())
        context.setdefault("import_form", ImportForm())
    return context


@permissions.require(permissions.VIEW)
@require_safe
def documents(request):
    if request.htmx:
        return render(request, f"{DOCUMENTS}#rows", document_page(request))
    return render(request, DOCUMENTS, page_context(request))


@permissions.require(permissions.CURATE)
@require_POST
def document_upload(request):
    form = DocumentForm(request.POST, request.FILES)
    if form.is_valid():
        data = form.cleaned_data
        given = {"file": data["file"]} if data["file"] else {"url": data["url"].strip()}
        options = {k: data[k] for k in ("chunk_size", "chunk_overlap") if data[k] is not None}
        try:
            document = operations.call("document_ingest", caller_of(request), data={
                **given, "scopes": data["scopes"], "types": data["types"], **options})
        except REFUSALS as exc:
            refuse(form, exc)
        else:
            context = page_context(request, form=DocumentForm(), oob=True,
                                   repeated=getattr(document, "repeated", False), **panel_context(document))
            return render_parts(request, DOCUMENTS, ["upload", "rows"], context)
    return render(request, f"{DOCUMENTS}#upload", {"form": form}, status=422)


@permissions.require(permissions.VIEW)
@require_safe
def document_detail(request, document_id):
    # Http404 unless the person may read it
    document = operations.call("document_get", caller_of(request), document_id=str(document_id))
    template = f"{DOCUMENTS}#document" if request.htmx else DETAIL
    return render(request, template, panel_context(document))


@permissions.require(permissions.CURATE)
@require_http_methods(["GET", "POST"])
def document_import(request):
    """POST: queue the import of a file (the knowledge_import operation) and swap in its job's panel, which polls
    while the job runs and shows the report when it ends; GET `?job=<id>`: that panel (the page, without htmx)."""
    if request.method == "GET":
        job = operations.call("job_get", caller_of(request), job_id=request.GET.get("job", ""))  # Http404 unless visible
        if job.kind != "import":
            raise Http404
        if request.htmx:
            return render(request, f"{DOCUMENTS}#import-job", import_context(job))
        return render(request, DOCUMENTS, page_context(request, **import_context(job)))
    form = ImportForm(request.POST, request.FILES)
    if form.is_valid():
        data = form.cleaned_data
        try:
            queued = operations.call("knowledge_import", caller_of(request), data={
                name: data[name] for name in ("file", "scopes", "types", "passphrase")})
        except REFUSALS as exc:
            refuse(form, exc)
        else:
            job = operations.call("job_get", caller_of(request), job_id=queued["job"]["id"])
            return render(request, f"{DOCUMENTS}#import", {"import_form": ImportForm(), **import_context(job)})
    return render(request, f"{DOCUMENTS}#import", {"import_form": form}, status=422)


def import_context(job) -> dict:
    """An import job's panel: polling while it is queued or running, then its report (the job's result) or why
    the file was refused."""
    return {"import_job": job, "import_polling": job.status in ("queued", "running"),
            "report": job.result if job.status == "succeeded" else None}
