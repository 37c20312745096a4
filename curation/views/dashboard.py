"""Dashboard: counts, what needs attention, recent activity, feedback over time."""
from django.shortcuts import render
from django.views.decorators.http import require_GET

from curation import dashboard as data
from curation import permissions
from curation.charts import stacked_bars


@permissions.require(permissions.VIEW)
@require_GET
def dashboard(request):
    return render(request, "curation/dashboard.html", {
        "counts": data.counts(), "attention": data.attention(), "activity": data.recent_activity(),
        "chart": stacked_bars(data.feedback_per_day()),
    })
