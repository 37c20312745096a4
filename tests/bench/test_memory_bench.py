"""bench/memory.py in its smallest shape: every process of the stack measured, the models held by the service alone."""
import pytest

pytestmark = pytest.mark.e2e  # the whole stack as a subprocess


def test_the_memory_bench_measures_every_process_and_only_the_model_service_holds_the_models():
    from bench import memory

    rows = memory.run(web=1, workers=1, saves=2, searches=2)

    roles = [row["role"] for row in rows]
    for role in ("serve (supervisor)", "model service", "gunicorn master", "web process", "MCP process",
                 "celery worker (main)"):
        assert role in roles, roles
    assert all(row["pss"] > 0 and row["uss"] <= row["rss"] for row in rows)
    service = next(row for row in rows if row["role"] == "model service")
    web = next(row for row in rows if row["role"] == "web process")
    # the segmenter, the rarity table and both embedders (~230 MB) are the service's, not the web process's
    assert service["uss"] > web["uss"] + 150, rows
    assert "| **KnowHub total" in memory.table(rows)
