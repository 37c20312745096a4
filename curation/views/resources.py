"""Resources: list and detail with secrets masked; an admin's reveal runs the API's resource_get operation
(through the filter chain, permission-checked and audited like any reveal)."""
from django.db.models import Q
from django.shortcuts import get_object_or_404, render
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST, require_safe

from agents import operations
from curation import permissions
from curation.views.common import caller_of, paginate
from resources.models import Resource, RevealEvent
from resources.operations import Gone
from resources.selectors import resource_versions_newest
from resources.services import secret_expired

DETAIL = "curation/resource_detail.html"
VERSIONS_SHOWN = 20


@permissions.require("resources.view_resource")
@require_safe
def resource_list(request):
    q = request.GET.get("q", "").strip()
    resources = Resource.objects.all()
    if q:
        resources = resources.filter(Q(id__icontains=q) | Q(title__icontains=q) | Q(content_type=q))
    page = paginate(resources, request.GET.get("page"))
    template = "curation/resource_list.html#rows" if request.htmx else "curation/resource_list.html"
    return render(request, template, {"page": page, "q": q})


@permissions.require("resources.view_resource")
@require_safe
def resource_detail(request, resource_id):
    resource = get_object_or_404(Resource, pk=resource_id)
    versions = resource_versions_newest(resource_id=resource.pk,
                                        limit=None if request.GET.get("versions") == "all" else VERSIONS_SHOWN)
    return render(request, DETAIL, {
        "resource": resource, "expired": secret_expired(resource), "versions": versions.rows,
        "version_count": versions.total, "knowledge": list(resource.knowledge.only("id", "task", "status")[:50]),
        "reveals": list(RevealEvent.objects.filter(resource_id=resource.pk)[:10]) if request.user.has_perm(permissions.AUDIT) else None,
    })


LEGACY_REVEAL = "/reveal"  # the old reveal link's suffix


def resource_page(request, resource_id):
    """A resource's one address: GET shows it, POST reveals its secret. The action is not a suffix of the path,
    since an id may contain '/' and end in "/reveal" (`cred/x/reveal` has a page of its own). The old reveal link,
    a POST to `<id>/reveal/`, still reveals `<id>` when no resource is named `<id>/reveal`."""
    if request.method != "POST":
        return resource_detail(request, resource_id)
    old_link = resource_id.removesuffix(LEGACY_REVEAL)
    if old_link != resource_id and not Resource.objects.filter(pk=resource_id).exists():
        resource_id = old_link
    return resource_reveal(request, resource_id)


@never_cache  # the secret must not stay in a browser's or a proxy's cache (Cache-Control: no-store)
@permissions.require(permissions.REVEAL)
@require_POST
def resource_reveal(request, resource_id):
    resource = get_object_or_404(Resource, pk=resource_id)
    if not resource.has_secret:
        return render(request, f"{DETAIL}#secret", {"resource": resource, "reveal_error": _("This resource has no secret.")}, status=404)
    try:
        revealed = operations.call("resource_get", caller_of(request), resource_id=resource.pk, data={"reveal": True},
                                   remote_addr=request.META.get("REMOTE_ADDR"),
                                   user_agent=request.META.get("HTTP_USER_AGENT", ""))
    except Gone:
        return render(request, f"{DETAIL}#secret", {"resource": resource, "expired": True}, status=410)
    return render(request, f"{DETAIL}#secret", {"resource": resource, "secret": revealed.revealed_secret})
