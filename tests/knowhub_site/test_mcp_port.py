"""/mcp asked of the web server (threaded WSGI) says where the MCP server's own process listens."""
import pytest


@pytest.mark.parametrize("method", ["get", "post"])
def test_mcp_on_the_web_server_answers_421_naming_the_mcp_servers_address(client, settings, method):
    settings.MCP_PORT = 9123

    reply = getattr(client, method)("/mcp", HTTP_HOST="localhost:8000")

    assert reply.status_code == 421
    body = reply.json()
    assert body["error"]["code"] == "mcp_elsewhere"
    assert body["mcp_url"] == "http://localhost:9123/mcp"
    assert "http://localhost:9123/mcp" in body["error"]["message"]


def test_the_answer_is_in_the_callers_language(client, settings):
    settings.MCP_PORT = 9123

    reply = client.post("/mcp", HTTP_HOST="localhost:8000", HTTP_ACCEPT_LANGUAGE="zh-Hans")

    assert reply.status_code == 421
    assert "MCP" in reply.json()["error"]["message"] and "listens" not in reply.json()["error"]["message"]
