"""The whole stack (`manage.py serve`: two web processes and a worker) scraped: metrics summed over processes."""
import json

import pytest

from knowhub_site.request_log import HEADER
from tests.conftest import wait_for
from tests.metrics_scrape import value
from tests.stack import Stack, hammer, statuses

pytestmark = pytest.mark.e2e

SAVES = 12


@pytest.fixture
def stack(tmp_path):
    running = Stack(tmp_path / "var", web_workers=2, worker_concurrency=1, extra_env={"LOG_FORMAT": "json"}).start()
    yield running
    running.stop()


def scrape(stack) -> str:
    reply = stack.request("GET", "/metrics")
    assert reply.status == 200, reply.body[:300]
    return reply.body.decode()


def test_a_scrape_sums_every_web_process_and_shows_the_workers_jobs(stack):
    token = stack.token("metrics_agent", "org:load")

    def save(client, n):
        return stack.request("POST", "/api/knowledge", {"task": f"Tip {client}-{n} about proxies", "content": "Rotate them.",
                                                        "types": ["tool"]}, token=token)

    replies = hammer(save, clients=4, per_client=SAVES // 4)
    assert statuses(replies) == {201: SAVES}
    assert stack.request("GET", "/api/knowledge/search?q=proxies&min_score=1", token=token).status == 200

    # each process writes its own files under var/metrics/ (which web process took which save is the kernel's
    # choice); the scrape, answered by one of them, sums them all, the worker's job metrics included
    assert list((stack.var_dir / "metrics").glob("counter_*.db"))

    def embedded():
        text = scrape(stack)
        return text if value(text, "knowhub_jobs_total", kind="embed_knowledge", outcome="success") >= 1 else None

    text = wait_for(embedded, timeout=180, interval=2, message="the worker's embedding jobs in the scrape")
    assert value(text, "knowhub_operation_calls_total", operation="knowledge_save", entry="rest", status="201") == SAVES
    assert value(text, "knowhub_http_request_duration_seconds_count", route="knowledge-collection", method="POST") == SAVES
    assert value(text, "knowhub_search_stage_duration_seconds_count", stage="keyword") >= 1
    assert value(text, "knowhub_job_duration_seconds_count", kind="embed_knowledge") >= 1
    assert value(text, "knowhub_db_pool_connections", state="max") >= 10  # the web processes' pools, summed
    assert 'knowhub_celery_queue_length{queue="celery"}' in text
    assert value(text, "knowhub_embedding_backlog") <= SAVES

    reply = stack.request("GET", "/metrics", token="not-the-metrics-token")
    assert reply.status == 200  # loopback is allowed whatever the header says


def test_the_stack_logs_one_json_line_per_request_and_no_access_log(stack):
    reply = stack.request("GET", "/healthz")
    request_id = reply.headers[HEADER]

    def line():
        for raw in stack.child_log("web").splitlines():
            if raw.startswith("{") and request_id in raw:
                return json.loads(raw)
        return None

    found = wait_for(line, timeout=20, message="the request's log line")
    assert found["event"] == "request" and found["route"] == "/healthz" and found["url_name"] == "healthz"
    assert sum(1 for raw in stack.child_log("web").splitlines() if request_id in raw) == 1
    assert '"GET /healthz HTTP/1.1"' not in stack.child_log("web")  # gunicorn's access log is off
