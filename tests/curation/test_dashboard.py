"""Dashboard: counts, items needing attention, recent activity, the feedback chart, and the ranking panel it loads after
the page."""
from datetime import timedelta

import pytest
from django.utils import timezone

from curation.charts import stacked_bars
from curation.dashboard import feedback_per_day
from jobs.models import Job
from knowledge.feedback import feedback_record
from knowledge.models import Knowledge
from tests.factories import make_knowledge, make_resource
from tests.callers import acting

pytestmark = pytest.mark.django_db


def test_dashboard_counts_and_attention(viewer_client):
    bad = make_knowledge(task="Harmful advice", harmful=4, types=["strategy"], embed=False)
    make_knowledge(task="Good advice", helpful=5, embed=False)
    gone = make_knowledge(task="Archived advice", embed=False)
    Knowledge.objects.filter(pk=gone.pk).update(status="archived")
    make_resource("cookies/site", expires_at=timezone.now() + timedelta(days=2))
    Job.objects.create(kind="evolve", status="failed", error="LLM said no", subject=bad.id, requested_by="user:x",
                       finished_at=timezone.now())
    body = viewer_client.get("/").content.decode()
    assert "<strong>3</strong>total" in body and "<strong>2</strong><a href=\"/knowledge/?status=active\">active</a>" in body
    assert "<strong>1</strong><a href=\"/knowledge/?types=strategy\">strategy</a>" in body
    most_harmful = body.split("<h3>Most harmful</h3>")[1].split("</section>")[0]
    assert "Harmful advice" in most_harmful and "Good advice" not in most_harmful
    lowest = body.split("<h3>Lowest quality</h3>")[1].split("</section>")[0]
    assert lowest.index("Harmful advice") < lowest.index("Good advice")
    assert "cookies/site" in body and "LLM said no" in body and "evolve job failed" in body
    assert f'evolve <a href="/knowledge/{bad.id}/">{bad.id}</a> · LLM said no' in body  # a failed job links to its item


def test_feedback_chart_counts_reports_per_day(viewer_client):
    item = make_knowledge(embed=False)
    feedback_record(acting(), knowledge_id=item.id, helpful=True)
    feedback_record(acting(), knowledge_id=item.id, helpful=True)
    feedback_record(acting(), knowledge_id=item.id, helpful=False)
    days = feedback_per_day(days=30)
    assert len(days) == 30 and days[-1]["day"] == timezone.now().date()
    assert (days[-1]["helpful"], days[-1]["harmful"]) == (2, 1) and sum(d["helpful"] for d in days) == 2
    chart = stacked_bars(days)
    assert chart["totals"] == {"helpful": 2, "harmful": 1}
    today = chart["bars"][-1]["segments"]
    assert [s["series"] for s in today] == ["helpful", "harmful"] and today[0]["h"] == 2 * today[1]["h"]
    body = viewer_client.get("/").content.decode()
    assert '<svg class="chart wide"' in body and 'class="helpful"' in body and "2 helpful" in body
    assert '<svg class="chart narrow" viewBox="0 0 360 220"' in body  # the phone's own drawing


def test_feedback_chart_counts_each_report_on_its_own_local_day_at_the_boundaries():
    from datetime import datetime, time, timedelta

    from knowledge.models import FeedbackCase

    item = make_knowledge(embed=False)
    with timezone.override("Asia/Shanghai"):
        today = timezone.localdate()

        def at(days_ago: int, clock: time):
            return timezone.make_aware(datetime.combine(today - timedelta(days=days_ago), clock))

        for when, kind in [(at(3, time(23, 59, 59)), "helpful"), (at(2, time.min), "harmful"), (at(2, time(12)), "helpful"),
                           (at(29, time.min), "harmful"), (at(30, time(23, 59, 59)), "helpful")]:  # the last: too old
            FeedbackCase.objects.create(knowledge=item, kind=kind, created_at=when)
        days = feedback_per_day(days=30)
    counts = {(today - d["day"]).days: (d["helpful"], d["harmful"]) for d in days if d["helpful"] or d["harmful"]}
    assert counts == {3: (1, 0), 2: (1, 1), 29: (0, 1)}
    assert days[0]["day"] == today - timedelta(days=29) and days[-1]["day"] == today


def test_empty_dashboard_says_so(viewer_client):
    body = viewer_client.get("/").content.decode()
    assert "No helpful or harmful reports in the last 30 days" in body and "No knowledge yet" in body
    assert stacked_bars(feedback_per_day())["empty"]


def _judged_search(*, result_ids, helpful_id, days_ago=0):
    from knowledge.models import SearchLog
    from knowledge.search_log import search_log_record

    log = search_log_record(principal="agent:a", readable_scopes=["org:acme"], query="q", top_k=5, min_score=3,
                            types=None, scopes=None, rank="quality", filters=None, result_ids=result_ids)
    SearchLog.objects.filter(pk=log.pk).update(created_at=timezone.now() - timedelta(days=days_ago))
    feedback_record(acting(), knowledge_id=helpful_id, helpful=True, search_id=log.pk)
    return log


def test_ranking_panel_shows_the_weekly_trend_of_judged_searches(viewer_client):
    from curation.dashboard import ranking_per_week

    a, b = make_knowledge(task="A", embed=False), make_knowledge(task="B", embed=False)
    _judged_search(result_ids=[a.id, b.id], helpful_id=a.id, days_ago=8)  # rank 1: nDCG 1, MRR 1
    _judged_search(result_ids=[a.id, b.id], helpful_id=b.id)  # rank 2: nDCG 1/log2(3) = 0.631, MRR 0.5
    _judged_search(result_ids=[b.id, a.id], helpful_id=b.id)  # rank 1
    weeks = ranking_per_week()
    assert [(w["judged"], round(w["ndcg"], 3), round(w["mrr"], 3)) for w in weeks] == [(1, 1.0, 1.0), (2, 0.815, 0.75)]
    assert weeks[0]["week"] < weeks[1]["week"]
    panel = viewer_client.get("/ranking/", HTTP_HX_REQUEST="true").content.decode()
    assert panel.lstrip().startswith('<section id="ranking" class="card ranking">') and "<html" not in panel
    assert "Ranking on your agents' searches" in panel and "hx-get" not in panel and "Loading" not in panel
    assert '<polyline class="ndcg"' in panel and '<polyline class="mrr"' in panel
    assert f"<td>{weeks[1]['week']}</td><td>2</td><td>2</td><td>0.815</td><td>0.750</td>" in panel
    assert "No judged searches yet" not in panel


def test_dashboard_asks_for_the_ranking_panel_after_the_page(viewer_client):
    item = make_knowledge(task="A", embed=False)
    _judged_search(result_ids=[item.id], helpful_id=item.id)
    body = viewer_client.get("/").content.decode()
    panel = body.split('<section id="ranking"')[1].split("</section>")[0]
    assert 'hx-get="/ranking/" hx-trigger="load" hx-swap="outerHTML" aria-busy="true"' in panel
    assert "Ranking on your agents' searches" in panel and "Loading the ranking…" in panel
    assert '<a href="/ranking/">Open it on its own page</a>' in panel  # without JavaScript
    assert "<polyline" not in body and "ranking-weeks" not in body  # the judged searches are not read here


def test_ranking_panel_is_a_page_of_its_own_without_javascript(viewer_client):
    item = make_knowledge(task="A", embed=False)
    _judged_search(result_ids=[item.id], helpful_id=item.id)
    page = viewer_client.get("/ranking/").content.decode()
    assert "<html" in page and "<title>Ranking on your agents' searches · KnowHub curation</title>" in page
    assert 'aria-current="page">Dashboard<' in page and '<table class="ranking-weeks">' in page
    assert "hx-get" not in page.split('<section id="ranking"')[1].split("</section>")[0]


def test_ranking_panel_empty_state_tells_how_to_get_judgments(viewer_client):
    body = viewer_client.get("/ranking/", HTTP_HX_REQUEST="true").content.decode()
    assert "No judged searches yet: agents send <code>search_id</code> with their feedback." in body


def test_recent_activity_lists_saves_newest_first_with_links(viewer_client):
    older = make_knowledge(task="First saved advice", owner="agent:scout", embed=False,
                           created_at=timezone.now() - timedelta(hours=2))
    newer = make_knowledge(task="Second saved advice", owner="agent:scribe", embed=False)
    activity = viewer_client.get("/").content.decode().split("<h2>Recent activity</h2>")[1].split("</section>")[0]
    assert "Nothing has happened yet" not in activity
    assert f'saved by agent:scribe · <a href="/knowledge/{newer.id}/">{newer.id}</a> · Second saved advice' in activity
    assert f'saved by agent:scout · <a href="/knowledge/{older.id}/">{older.id}</a>' in activity
    assert activity.index("agent:scribe") < activity.index("agent:scout")


def test_a_large_base_shows_estimated_counts_and_says_so(viewer_client, monkeypatch):
    from django.db import connection

    monkeypatch.setattr("curation.dashboard.ESTIMATE_ABOVE", 10)
    for n in range(30):
        item = make_knowledge(task=f"Advice {n}", types=["strategy"] if n % 3 == 0 else ["tool"], embed=False)
        if n < 6:
            Knowledge.objects.filter(pk=item.pk).update(status="archived")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_knowledge")  # what autovacuum does as a table grows
    body = viewer_client.get("/").content.decode()
    assert "<strong>about 30</strong>total" in body
    assert '<strong>about 24</strong><a href="/knowledge/?status=active">' in body
    assert '<strong>about 6</strong><a href="/knowledge/?status=archived">' in body
    # active items by type: the active share times each type's share (8 strategy and 16 tool items are active)
    assert '<strong>about 16</strong><a href="/knowledge/?types=tool">' in body
    assert '<strong>about 8</strong><a href="/knowledge/?types=strategy">' in body
    assert "Estimated from the database's statistics" in body


def test_the_lowest_quality_items_are_those_a_full_sort_finds(viewer_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from curation.dashboard import attention

    most_harmful = [make_knowledge(task=f"Harmful but liked {n}", score=5, helpful=3, harmful=4, embed=False)
                    for n in range(5)]  # quality 0
    less_harmful = [make_knowledge(task=f"Harmful once {n}", score=1, harmful=1, embed=False) for n in range(3)]  # -1
    for n in range(10):
        make_knowledge(task=f"Plain {n}", score=1, embed=False)  # quality 1
    with CaptureQueriesContext(connection) as captured:
        lowest = [k.id for k in attention()["lowest_quality"]]
    # the three at -1 (newest first), then the two newest at 0: less harmful items than the 5 most harmful count too
    assert lowest == [k.id for k in less_harmful[::-1]] + [k.id for k in most_harmful[::-1][:2]]
    assert any('"harmful" >= 1' in q["sql"] for q in captured.captured_queries)  # the plain ones were not sorted
    Knowledge.objects.update(harmful=0)  # no harmful reports: every item is sorted, still the lowest first
    everything = sorted(Knowledge.objects.filter(status="active"), key=lambda k: (k.quality_score, -k.updated_at.timestamp()))
    assert [k.id for k in attention()["lowest_quality"]] == [k.id for k in everything[:5]]
