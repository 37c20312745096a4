"""Dashboard: counts, items needing attention, recent activity and the feedback chart."""
from datetime import timedelta

import pytest
from django.utils import timezone

from curation.charts import stacked_bars
from curation.dashboard import feedback_per_day
from jobs.models import Job
from knowledge.feedback import feedback_record
from knowledge.models import Knowledge
from tests.factories import make_knowledge, make_resource

pytestmark = pytest.mark.django_db


def test_dashboard_counts_and_attention(viewer_client):
    bad = make_knowledge(task="Harmful advice", harmful=4, types=["strategy"], embed=False)
    make_knowledge(task="Good advice", helpful=5, embed=False)
    gone = make_knowledge(task="Archived advice", embed=False)
    Knowledge.objects.filter(pk=gone.pk).update(status="archived")
    make_resource("cookies/site", expires_at=timezone.now() + timedelta(days=2))
    Job.objects.create(kind="evolve", status="failed", error="LLM said no", knowledge=bad, requested_by="user:x",
                       finished_at=timezone.now())
    body = viewer_client.get("/").content.decode()
    assert "<strong>3</strong>total" in body and "<strong>2</strong><a href=\"/knowledge/?status=active\">active</a>" in body
    assert "<strong>1</strong><a href=\"/knowledge/?types=strategy\">strategy</a>" in body
    most_harmful = body.split("<h3>Most harmful</h3>")[1].split("</section>")[0]
    assert "Harmful advice" in most_harmful and "Good advice" not in most_harmful
    lowest = body.split("<h3>Lowest quality</h3>")[1].split("</section>")[0]
    assert lowest.index("Harmful advice") < lowest.index("Good advice")
    assert "cookies/site" in body and "LLM said no" in body and "evolve job failed" in body


def test_feedback_chart_counts_reports_per_day(viewer_client):
    item = make_knowledge(embed=False)
    feedback_record(knowledge_id=item.id, helpful=True)
    feedback_record(knowledge_id=item.id, helpful=True)
    feedback_record(knowledge_id=item.id, helpful=False)
    days = feedback_per_day(days=30)
    assert len(days) == 30 and days[-1]["day"] == timezone.now().date()
    assert (days[-1]["helpful"], days[-1]["harmful"]) == (2, 1) and sum(d["helpful"] for d in days) == 2
    chart = stacked_bars(days)
    assert chart["totals"] == {"helpful": 2, "harmful": 1}
    today = chart["bars"][-1]["segments"]
    assert [s["series"] for s in today] == ["helpful", "harmful"] and today[0]["h"] == 2 * today[1]["h"]
    body = viewer_client.get("/").content.decode()
    assert '<svg class="chart"' in body and 'class="helpful"' in body and "2 helpful" in body


def test_empty_dashboard_says_so(viewer_client):
    body = viewer_client.get("/").content.decode()
    assert "No helpful or harmful reports in the last 30 days" in body and "No knowledge yet" in body
    assert stacked_bars(feedback_per_day())["empty"]
