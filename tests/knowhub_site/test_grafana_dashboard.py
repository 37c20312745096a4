"""docs/grafana-knowhub.json: valid, on a chosen Prometheus data source, and every query names a metric KnowHub exports."""
import json
import re

import pytest

from tests.conftest import REPO_ROOT
from tests.metrics_scrape import families

DASHBOARD = REPO_ROOT / "docs" / "grafana-knowhub.json"
SUFFIXES = re.compile(r"_(total|bucket|count|sum|created)$")


def graphs() -> list[dict]:
    return [panel for panel in json.loads(DASHBOARD.read_text())["panels"] if panel["type"] != "row"]


def metric_names(expr: str) -> set[str]:
    """The families an expression reads (a counter's `_total`, a histogram's `_bucket` belong to their family)."""
    return {SUFFIXES.sub("", name) for name in re.findall(r"\bknowhub_[a-z_]+", expr)}


@pytest.fixture
def exported(client, db) -> set[str]:
    response = client.get("/metrics")
    assert response.status_code == 200
    return {name for name in families(response.content.decode()) if name.startswith("knowhub_")}


def test_the_dashboard_picks_its_prometheus_data_source_from_a_variable():
    dashboard = json.loads(DASHBOARD.read_text())
    [variable] = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert variable["query"] == "prometheus"
    for panel in graphs():
        assert panel["datasource"]["uid"] == f"${{{variable['name']}}}"


def test_every_panel_queries_metrics_knowhub_exports(exported):
    for panel in graphs():
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = metric_names(target["expr"])
            assert names and names <= exported, (panel["title"], names - exported)


def test_every_exported_metric_has_a_panel(exported):
    shown = {name for panel in graphs() for target in panel["targets"] for name in metric_names(target["expr"])}
    assert exported <= shown, exported - shown
