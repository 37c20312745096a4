"""The database unreachable: every entry point answers 503 with Retry-After in the API's error shape (issue 12, item 6).

The connection really fails: the test points the connection settings at a closed port and drops the open
connection, so the next query has to reconnect and cannot.
"""
import asyncio
import json
from contextlib import contextmanager

import pytest
from django.db import connection

from api import mcp_http, mcp_server
from tests.api.conftest import client_with, token

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def database_down():
    settings = connection.settings_dict
    saved = {key: settings[key] for key in ("HOST", "PORT", "OPTIONS")}
    connection.close()
    settings.update(HOST="127.0.0.1", PORT="1", OPTIONS={**saved["OPTIONS"], "host": "127.0.0.1", "port": 1,
                                                            "connect_timeout": 2})
    try:
        yield
    finally:
        connection.close()
        settings.update(saved)


def assert_unavailable(status: int, headers: dict, body: dict) -> None:
    assert status == 503
    assert int(headers["retry-after"]) > 0
    assert body["error"]["code"] == "unavailable" and "database" in body["error"]["message"]


@pytest.mark.parametrize("method, url, body", [
    ("get", "/api/knowledge", None),
    ("get", "/api/knowledge/search?q=login", None),
    ("get", "/api/knowledge/knowledge-20260101-abcd", None),
    ("post", "/api/knowledge", {"task": "t", "content": "c", "types": ["tool"]}),
    ("get", "/api/resource/code/login", None),
])
def test_the_rest_api_answers_503_with_retry_after(method, url, body):
    client = client_with(token())
    with database_down():
        response = getattr(client, method)(url, body, format="json") if body else getattr(client, method)(url)
    assert_unavailable(response.status_code, {"retry-after": response.get("Retry-After")}, response.json())


def test_an_mcp_tool_call_answers_503_with_retry_after():
    key = token()
    with database_down():
        with pytest.raises(mcp_server._Refused) as refused:
            mcp_server._run_sync(key, lambda caller: None)
    error = refused.value.error
    assert error["status"] == 503 and error["code"] == "unavailable" and error["retry_after"] > 0


def test_the_mcp_bearer_gate_answers_503_with_retry_after():
    key = token()
    sent = []

    async def app(scope, receive, send):
        raise AssertionError("the gate let the request through")

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": "/mcp", "headers": [(b"host", b"localhost"),
                                                         (b"authorization", f"Bearer {key}".encode())]}
    with database_down():
        asyncio.run(mcp_http.BearerGate(app)(scope, None, send))
    start, body = sent
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    assert_unavailable(start["status"], headers, json.loads(body["body"]))


def test_a_write_rolled_back_as_a_collision_is_a_retryable_503_and_leaves_nothing_written():
    """PostgreSQL's deadlock_detected (40P01), raised here by a trigger as it would be by two requests locking the
    same rows in opposite orders: not "the database is unavailable", and the report is not half-stored."""
    client = client_with(token())
    item = client.post("/api/knowledge", {"task": "t", "content": "c", "types": ["tool"]}, format="json").json()
    with connection.cursor() as cursor:
        cursor.execute("CREATE FUNCTION collide() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                       "RAISE EXCEPTION 'deadlock detected' USING ERRCODE = 'deadlock_detected'; END $$")
        cursor.execute("CREATE TRIGGER collide BEFORE INSERT ON knowledge_feedbackcase "
                       "FOR EACH ROW EXECUTE FUNCTION collide()")
    try:
        collided = client.put(f"/api/knowledge/{item['id']}", {"add_helpful_case": {"outcome": "ok"}}, format="json")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER collide ON knowledge_feedbackcase")
            cursor.execute("DROP FUNCTION collide()")
    assert collided.status_code == 503 and collided["Retry-After"] == "1"
    assert collided.json()["error"]["code"] == "write_conflict" and "nothing was written" in collided.json()["error"]["message"]
    reported = client.put(f"/api/knowledge/{item['id']}", {"add_helpful_case": {"outcome": "ok"}}, format="json")
    assert reported.status_code == 200 and reported.json()["eval"]["helpful"] == 1  # the collided one counted nowhere
