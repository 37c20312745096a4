"""Audit (admins): API writes and secret reveals, newest first."""
from django.shortcuts import render
from django.views.decorators.http import require_GET

from agents.models import AuditEvent
from curation import permissions
from curation.views.common import paginate
from resources.models import RevealEvent


@permissions.require(permissions.AUDIT)
@require_GET
def audit(request):
    return render(request, "curation/audit.html", {
        "reveals": RevealEvent.objects.all()[:50],
        "page": paginate(AuditEvent.objects.all(), request.GET.get("page")),
    })
