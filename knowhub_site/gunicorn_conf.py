"""gunicorn's configuration for KnowHub's web server, threaded WSGI (`serve` passes it with `--config <this file>`). The
MCP server's uvicorn worker parses HTTP itself (h11: a request head up to 16 KB, its own plain-text 400s); agents
search through the web server.

- Request lines up to REQUEST_LINE_MAX bytes. An agent's GET search carries its question in the query string: `q`
  may hold 2,000 characters, 18,000 bytes once Chinese is percent-encoded, with room left for types, scopes and a
  filter expression. gunicorn's default, 4,094 bytes, refused a question of ~450 Chinese characters, and gunicorn
  caps the setting at 8,190 (its module's MAX_REQUEST_LINE, read when each request is parsed), so the cap is raised
  here, in the master, before any worker is forked. Still bounded: 0 ("unlimited") would let a client grow one request
  line without end.
- What gunicorn answers itself, before Django sees the request (a request line too long, headers too large, a
  malformed request), is in the API's JSON error shape (core.errors: `{"error": {"code", "message", "fields"}}`)
  instead of gunicorn's HTML page. The body is the HTTP/1.1 response gunicorn writes, Connection: close.
- Stalled clients (knowhub_site/slow_clients.py): a request's head must arrive within REQUEST_READ_SECONDS
  (`KNOWHUB_REQUEST_READ_SECONDS`, 30 by default; 0 turns the bounds off), and as long may pass between two reads of a
  body, else 408; connections closing after their response linger on a thread of their own, not the event loop's.
"""
import importlib.util
import json
from pathlib import Path

from gunicorn import util
from gunicorn.http import message

from core.env import env_int


def _beside(name: str):
    """The module `name` beside this file, loaded by its path: imported as knowhub_site.<name>, the package would load
    the Celery app into the master (this file is read as a file for the same reason, see `serve`)."""
    spec = importlib.util.spec_from_file_location(f"knowhub_gunicorn_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REQUEST_LINE_MAX = 64 * 1024

message.MAX_REQUEST_LINE = max(message.MAX_REQUEST_LINE, REQUEST_LINE_MAX)
limit_request_line = REQUEST_LINE_MAX

# How long an idle keep-alive connection stays open (gunicorn's default: 2 s). A client must close an idle connection
# before the server does, or a request it sends on it as the server closes it is lost ("server disconnected": the
# agent client cannot tell whether a feedback call was counted). httpx, the agent client's, keeps one 5 s; an idle
# connection waits in the worker's poller, not on a thread.
keepalive = 15

CODES = {400: "bad_request", 403: "forbidden", 408: "request_timeout", 414: "uri_too_long", 417: "expectation_failed",
         431: "headers_too_large", 500: "server_error", 501: "not_implemented"}
HINTS = {414: "; a long search question fits in the body of POST /api/knowledge/search"}


def error_response(status: int, reason: str, message_text: str) -> bytes:
    """The HTTP response gunicorn sends for a request it refused, its body the API's JSON error shape."""
    body = json.dumps({"error": {"code": CODES.get(status, "bad_request"),
                                 "message": f"{reason}: {message_text}{HINTS.get(status, '')}" if message_text else reason,
                                 "fields": {}}}).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode("latin1")
    return head + body


def write_error(sock, status_int, reason, mesg):
    util.write_nonblock(sock, error_response(int(status_int), reason, str(mesg)))


util.write_error = write_error  # the workers call util.write_error(...) through the module: each error is JSON


REQUEST_READ_SECONDS = env_int("KNOWHUB_REQUEST_READ_SECONDS", 30)
slow_clients = _beside("slow_clients")
slow_clients.install(REQUEST_READ_SECONDS, error_response)


def worker_exit(server, worker):
    """A worker stopping lets its lingering connections finish closing first (a reset could cut a last response)."""
    slow_clients.LINGERER.wait(slow_clients.Lingerer.LINGER_SECONDS)
