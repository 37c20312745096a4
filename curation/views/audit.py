"""Audit (admins): API writes and secret reveals, newest first."""
from django.shortcuts import render
from django.views.decorators.http import require_safe

from agents.models import AuditEvent
from curation import permissions
from curation.audit import with_target_urls
from curation.views.common import bounded_page
from resources.models import RevealEvent


@permissions.require(permissions.AUDIT)
@require_safe
def audit(request):
    page = bounded_page(AuditEvent.objects.all(), request.GET.get("page"))  # every API write: a long table
    return render(request, "curation/audit.html", {
        "reveals": RevealEvent.objects.all()[:50], "page": page, "events": with_target_urls(page.object_list),
    })
