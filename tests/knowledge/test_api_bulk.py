"""POST /api/knowledge/bulk: many new items, each checked on its own; good ones land, bad ones are named."""
import pytest

from api.mcp_server import _op, _run_sync
from knowledge.models import Knowledge
from tests.callers import agent_client, agent_key
from tests.factories import make_resource

pytestmark = pytest.mark.django_db


def item(task: str, **fields) -> dict:
    return {"task": task, "content": f"How to {task.lower()}", "types": ["strategy"], **fields}


@pytest.fixture
def writer():
    return agent_client("importer", ["team:a"], writable_scopes=["team:a"])


def test_good_items_land_and_bad_ones_are_reported_at_their_index(writer):
    make_resource("credentials/b-only", scopes=["team:b"])
    body = {"items": [
        item("Rotate the API keys", tags={"domain": "ops"}),
        {"content": "no task", "types": ["tool"]},
        item("Write to another team", scopes=["team:b"]),
        item("Link what I cannot read", resource_ids=["credentials/b-only"]),
        item("Roll back a deploy"),
    ]}
    reply = writer.post("/api/knowledge/bulk", body, format="json")
    assert reply.status_code == 200, reply.content
    results = reply.json()["results"]
    assert [r["ok"] for r in results] == [True, False, False, False, True]
    assert reply.json()["succeeded"] == 2 and reply.json()["failed"] == 3
    assert results[1]["error"]["message"].startswith("items.1.task:")
    assert "items.1.task" in results[1]["error"]["fields"]
    assert results[2]["error"]["code"] == "permission_denied" and "team:b" in results[2]["error"]["message"]
    assert results[3]["error"]["message"].startswith("items.3.resource_ids:")
    stored = Knowledge.objects.in_bulk([results[0]["knowledge_id"], results[4]["knowledge_id"]])
    assert {k.task for k in stored.values()} == {"Rotate the API keys", "Roll back a deploy"}
    assert all(k.scopes == ["team:a"] and k.owner == "agent:importer" and k.source["agent_id"] == "importer"
               for k in stored.values())
    assert Knowledge.objects.count() == 2


def test_bulk_saved_items_are_keyword_searchable_at_once_and_queued_for_the_worker(writer):
    reply = writer.post("/api/knowledge/bulk", {"items": [item(f"Zebra crossing rule {n}") for n in range(3)]},
                        format="json")
    assert reply.json()["succeeded"] == 3
    found = writer.get("/api/knowledge/search", {"q": "zebra crossing", "top_k": 5, "rank": "relevance"}).json()
    assert {r["task"] for r in found["results"]} == {f"Zebra crossing rule {n}" for n in range(3)}
    got = writer.get(f"/api/knowledge/{reply.json()['results'][0]['knowledge_id']}").json()
    assert got["vector_status"] == "pending"


def test_a_repeated_idempotency_key_replays_the_reply_and_stores_nothing_twice(writer):
    body = {"items": [item("Drain a node"), item("Cordon a node")]}
    first = writer.post("/api/knowledge/bulk", body, format="json", HTTP_IDEMPOTENCY_KEY="import-7")
    again = writer.post("/api/knowledge/bulk", body, format="json", HTTP_IDEMPOTENCY_KEY="import-7")
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert Knowledge.objects.count() == 2
    other = writer.post("/api/knowledge/bulk", {"items": [item("Something else")]}, format="json",
                        HTTP_IDEMPOTENCY_KEY="import-7")
    assert other.status_code == 409


@pytest.mark.parametrize("body, field", [
    ({"items": []}, "items"),
    ({"items": [item(f"n{n}") for n in range(501)]}, "items"),
    ({"items": "not a list"}, "items"),
    ({"items": [item("x")], "extra": 1}, "extra"),
])
def test_a_malformed_batch_is_a_400_naming_the_field_and_stores_nothing(writer, body, field):
    reply = writer.post("/api/knowledge/bulk", body, format="json")
    assert reply.status_code == 400 and field in reply.json()["error"]["fields"]
    assert not Knowledge.objects.exists()


def test_a_token_that_writes_nowhere_is_refused_the_whole_batch():
    reader = agent_client("reader", ["team:a"], writable_scopes=[])
    reply = reader.post("/api/knowledge/bulk", {"items": [item("x", scopes=["team:a"])]}, format="json")
    assert reply.status_code == 403 and reply.json()["error"]["code"] == "permission_denied"
    assert not Knowledge.objects.exists()


@pytest.mark.django_db(transaction=True)  # _run_sync closes connections as a request's end would
def test_mcp_bulk_save_runs_the_same_operation():
    key = agent_key("importer", ["team:a"], writable_scopes=["team:a"])
    reply = _run_sync(key, _op("knowledge_bulk_save", {"items": [item("Via MCP"), {"task": "", "types": []}]}))
    assert [r["ok"] for r in reply["results"]] == [True, False]
    assert Knowledge.objects.get().task == "Via MCP"


@pytest.fixture
def two_team_writer():
    return agent_client("importer", ["team:a", "team:b"], writable_scopes=["team:a", "team:b"])


# Each check a new item passes (services.check_new_item), refusing one item of a bulk save at its index.
@pytest.mark.parametrize("bad, code, field", [
    (item("Write to a scope the token cannot write", scopes=["team:c"]), "permission_denied", None),
    (item("Link an unknown resource", resource_ids=["credentials/none"]), "invalid", "resource_ids"),
    (item("Link what the caller cannot read", resource_ids=["credentials/c-only"]), "invalid", "resource_ids"),
    (item("Link what readers of both teams cannot read", scopes=["team:a", "team:b"], resource_ids=["credentials/a-only"]),
     "invalid", "resource_ids"),
    (item("Keep a secret that does not exist", secure_resource_id="credentials/none"), "invalid", "secure_resource_id"),
    (item("Keep a secret readers of both teams cannot read", scopes=["team:a", "team:b"],
          secure_resource_id="credentials/a-only"), "invalid", "secure_resource_id"),
])
def test_each_check_refuses_its_item_at_its_index_and_the_others_land(two_team_writer, bad, code, field):
    make_resource("credentials/a-only", scopes=["team:a"])
    make_resource("credentials/c-only", scopes=["team:c"])
    make_resource("credentials/both", scopes=["team:a", "team:b"])
    body = {"items": [item("First good one", resource_ids=["credentials/both"]), bad, item("Second good one")]}
    reply = two_team_writer.post("/api/knowledge/bulk", body, format="json")
    assert reply.status_code == 200, reply.content
    results = reply.json()["results"]
    assert [r["ok"] for r in results] == [True, False, True]
    assert results[1]["error"]["code"] == code and results[1]["knowledge_id"] is None
    if field:
        assert list(results[1]["error"]["fields"]) == [f"items.1.{field}"]
        assert results[1]["error"]["message"].startswith(f"items.1.{field}:")
    assert set(Knowledge.objects.values_list("task", flat=True)) == {"First good one", "Second good one"}


def test_each_items_resources_are_looked_up_once(writer):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for n in range(3):
        make_resource(f"credentials/a-{n}", scopes=["team:a"])
    body = {"items": [item(f"Use key {n}", resource_ids=[f"credentials/a-{n}"], secure_resource_id=f"credentials/a-{n}")
                      for n in range(3)]}
    with CaptureQueriesContext(connection) as queries:
        reply = writer.post("/api/knowledge/bulk", body, format="json")
    assert reply.json()["succeeded"] == 3
    lookups = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('SELECT "resources_resource"."id"')]
    assert len(lookups) == 3 * 2  # per item: its resource_ids, its secure_resource_id
