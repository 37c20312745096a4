"""bench/api_load.py drives a running server over loopback and checks that no feedback increment is lost."""
import pytest

from tests.stack import Stack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    running = Stack(tmp_path_factory.mktemp("api-load") / "var").start()
    yield running
    running.stop()


def test_the_load_generator_reports_each_operation_and_client_count_and_counts_every_increment(stack, capsys):
    from bench import api_load

    token = stack.token("bench_api_load", "bench:api_load")
    status = api_load.main(["--url", stack.base, "--token", token, "--ops", "search-repeated,get,feedback",
                            "--clients", "1,2", "--seconds", "1", "--seed-items", "12", "--drain-seconds", "0"])
    out = capsys.readouterr().out
    assert status == 0, out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "operation" not in line]
    assert [(row.split("|")[2].strip(), row.split("|")[3].strip()) for row in rows] == [
        ("search-repeated", "1"), ("search-repeated", "2"), ("get", "1"), ("get", "2"), ("feedback", "1"), ("feedback", "2")]
    assert all(row.split("|")[10].strip() == "0" for row in rows)  # no 5xx
    assert "ok:" in out and "MISMATCH" not in out


def test_a_backlog_is_saved_through_the_bulk_api_and_the_runs_go_on_while_the_worker_embeds_it(stack, capsys):
    from bench import api_load

    token = stack.token("bench_api_load_backlog", "bench:api_load_backlog")
    before = {item["id"] for item in api_load.newest_items(stack.base, token, 400)}
    status = api_load.main(["--url", stack.base, "--token", token, "--scope", "bench:api_load_backlog",
                            "--ops", "search-fresh", "--clients", "1", "--seconds", "1", "--seed-items", "4",
                            "--backlog", "300"])
    out = capsys.readouterr().out
    assert status == 0, out
    saved = [item for item in api_load.newest_items(stack.base, token, 400) if item["id"] not in before]
    assert len(saved) == 4 + 300  # the scope's seed, then the backlog (kept: a running server is not the bench's)
    assert sum(f"run {api_load.RUN_TAG}-1000" in item["content"] for item in saved) == 300
    # 300 items take the worker minutes; the one-second run is over long before
    assert "search-fresh 1: the worker was embedding the backlog throughout" in out
