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
