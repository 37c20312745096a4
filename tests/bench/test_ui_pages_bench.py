"""The UI pages bench on a small seed: it adds the pages' histories once and times every page."""
import pytest

pytestmark = pytest.mark.django_db


def test_the_ui_pages_bench_adds_the_histories_once_and_times_each_page(settings, tmp_path):
    from bench import seed_data, ui_pages
    from knowledge.models import FeedbackCase, Knowledge, SearchLog

    settings.VAR_DIR = tmp_path / "var"
    seed_data.seed(60, units=24)
    item_id = ui_pages.prepare()
    assert ui_pages.prepare() == item_id  # once per database
    seeded = Knowledge.objects.filter(scopes__contains=["seed"])
    reports = FeedbackCase.objects.filter(knowledge__in=seeded, search__isnull=True)
    assert reports.filter(kind="helpful").count() == sum(seeded.values_list("helpful", flat=True))  # the counters as rows
    assert reports.filter(kind="harmful").count() == sum(seeded.values_list("harmful", flat=True))
    assert SearchLog.objects.count() == 3 and FeedbackCase.objects.filter(search__isnull=False).count() == 3
    item = Knowledge.objects.get(pk=item_id)
    assert item.scopes == [ui_pages.SCOPE] and item.feedback_cases.count() == ui_pages.REPORTS

    rows = ui_pages.measure(60, renders=3, profile=False, explain=False)
    assert [row["page"] for row in rows] == list(ui_pages.pages(item_id, ["q"]))
    assert all(row["ms"][0] > 0 and row["queries"] > 4 for row in rows)  # session, user and permissions, then the page's
