"""Dashboard: counts, what needs attention, recent activity, feedback over time; the ranking on agents' searches
follows in its own request (`dashboard_ranking`), asked for once the page has loaded."""
from django.shortcuts import render
from django.views.decorators.http import require_safe

from curation import dashboard as data
from curation import permissions
from curation.charts import PHONE_HEIGHT, PHONE_WIDTH, stacked_bars, unit_lines

RANKING = "curation/ranking.html"


@permissions.require(permissions.VIEW)
@require_safe
def dashboard(request):
    return render(request, "curation/dashboard.html", {
        "counts": data.counts(), "attention": data.attention(), "activity": data.recent_activity(),
        "chart": stacked_bars(days := data.feedback_per_day()),
        "phone_chart": stacked_bars(days, width=PHONE_WIDTH, height=PHONE_HEIGHT),
    })


@permissions.require(permissions.VIEW)
@require_safe
def dashboard_ranking(request):
    """The ranking panel: swapped into the dashboard by htmx, or a page of its own for a browser without JavaScript."""
    weeks = data.ranking_per_week()
    ranking = {"weeks": weeks, "chart": unit_lines(weeks, series=("ndcg", "mrr"), label="week")}
    return render(request, f"{RANKING}#panel" if request.htmx else RANKING, {"ranking": ranking})
