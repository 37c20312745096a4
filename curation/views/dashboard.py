"""Dashboard: counts, what needs attention, recent activity, feedback over time, ranking on agents' searches."""
from django.shortcuts import render
from django.views.decorators.http import require_GET

from curation import dashboard as data
from curation import permissions
from curation.charts import PHONE_HEIGHT, PHONE_WIDTH, stacked_bars, unit_lines


@permissions.require(permissions.VIEW)
@require_GET
def dashboard(request):
    return render(request, "curation/dashboard.html", {
        "counts": data.counts(), "attention": data.attention(), "activity": data.recent_activity(),
        "chart": stacked_bars(days := data.feedback_per_day()),
        "phone_chart": stacked_bars(days, width=PHONE_WIDTH, height=PHONE_HEIGHT),
        "ranking": _ranking(data.ranking_per_week()),
    })


def _ranking(weeks: list[dict]) -> dict:
    return {"weeks": weeks, "chart": unit_lines(weeks, series=("ndcg", "mrr"), label="week")}
