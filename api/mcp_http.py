"""Streamable HTTP for the MCP server under /mcp, in the same ASGI process as Django.

`knowhub_site.asgi.application` routes `/mcp` here and everything else to
Django; lifespan events (which start the SDK's session manager) come here too,
because Django's ASGI handler takes only HTTP. Requests are stateless and
answered as JSON, so any of several web workers can take any request.

Before the SDK sees a request, `BearerGate` checks the Host against
ALLOWED_HOSTS (as Django would) and the Bearer token against the same tokens
as the REST API: 401 with the API's error shape otherwise (503 with Retry-After when the
database cannot be reached to check it).

The limits are the REST API's: a body over `DATA_UPLOAD_MAX_MEMORY_SIZE` is 413 (declared or streamed; the SDK
counts it), a POST whose Content-Type is not JSON 415 (`JsonPostsOnly`, before the SDK, which said 400). The SDK
answers a few refusals as plain text: `JsonErrors` gives those the API's error shape too, with the API's message for a
413; its JSON-RPC errors pass as they are.

GET /mcp is answered 405, as the specification allows a server that offers no SSE stream: a stateless server has
nothing to send on one, and the SDK kept such a stream open for good, each holding one of the process's places
(knowhub_site/concurrency.py) until a few idle clients held them all.
"""
import json
from http import HTTPStatus

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.http.request import split_domain_port, validate_host
from mcp.server.transport_security import TransportSecuritySettings

from agents.auth import active_token
from api.mcp_server import bearer_key, server
from core.errors import DATABASE_DOWN, RETRY_AFTER_SECONDS, body_too_large_message

MCP_PATH = "/mcp"


def _token_of(key: str):
    """The active token of `key`, read in a thread of the event loop's executor (not the one thread every
    thread-sensitive call shares, where it would wait behind another agent's long tool call); the thread's connection
    is given back after it."""
    try:
        return active_token(key)
    finally:
        connections.close_all()


def _is_mcp(path: str) -> bool:
    return path == MCP_PATH or path.startswith(MCP_PATH + "/")


async def _reply(send, status: int, code: str, message: str, extra_headers=()) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "fields": {}}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra_headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BearerGate:
    """ASGI middleware: a known host and an active agent token, or no further."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            domain, _ = split_domain_port(headers.get("host", ""))
            if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
                await _reply(send, 400, "bad_host", "Host is not in ALLOWED_HOSTS")
                return
            key = bearer_key(headers)
            try:
                token = await sync_to_async(_token_of, thread_sensitive=False)(key) if key else None
            except DATABASE_DOWN:
                await _reply(send, 503, "unavailable", "the database is unavailable; retry later",
                             [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])
                return
            if token is None:
                message = "invalid or revoked token" if key else "send 'Authorization: Bearer <token>'"
                await _reply(send, 401, "not_authenticated", message, [(b"www-authenticate", b"Bearer")])
                return
        await self.app(scope, receive, send)


def _media_type(headers) -> str:
    for key, value in headers:
        if key.lower() == b"content-type":
            return value.decode("latin-1").split(";")[0].strip().lower()
    return ""


class JsonPostsOnly:
    """ASGI middleware: a POST whose body is not declared JSON is refused 415, as the REST API refuses it."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            media_type = _media_type(scope.get("headers", []))
            if media_type != "application/json":
                await _reply(send, 415, "unsupported_media_type",
                             f'unsupported media type "{media_type}" in request: send application/json'
                             if media_type else "the request has no Content-Type: send application/json")
                return
        await self.app(scope, receive, send)


ERROR_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 406: "not_acceptable",
               413: "too_large", 415: "unsupported_media_type"}


class JsonErrors:
    """ASGI middleware: an error reply that is not JSON (the SDK's transport checks answer in plain text) is sent
    as the API's `{"error": {"code", "message", "fields"}}`, its text the message."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: dict = {}

        async def sending(message):
            if message["type"] == "http.response.start":
                content_type = dict(message.get("headers", [])).get(b"content-type", b"")
                if message["status"] >= 400 and not content_type.startswith(b"application/json"):
                    held.update(start=message, body=b"")
                    return
            elif message["type"] == "http.response.body" and "start" in held:
                held["body"] += message.get("body", b"")
                if message.get("more_body"):
                    return
                start = held.pop("start")
                text = held["body"].decode("utf-8", "replace").strip()[:500] or HTTPStatus(start["status"]).phrase
                if start["status"] == 413:
                    text = body_too_large_message()
                code = ERROR_CODES.get(start["status"], "bad_request" if start["status"] < 500 else "server_error")
                kept = [(k, v) for k, v in start.get("headers", []) if k.lower() not in (b"content-type", b"content-length")]
                await _reply(send, start["status"], code, text, kept)
                return
            await send(message)

        await self.app(scope, receive, sending)


class NoEventStream:
    """ASGI middleware: GET (the server-initiated SSE stream) is refused 405 before the SDK opens a stream."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "GET":
            await _reply(send, 405, "method_not_allowed", "this server offers no SSE stream: send requests by POST",
                         [(b"allow", b"POST")])
            return
        await self.app(scope, receive, send)


def mcp_http_app():
    """The SDK's Starlette app for /mcp (host checks are BearerGate's, from ALLOWED_HOSTS)."""
    return server.streamable_http_app(
        streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
        max_request_body_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


def with_mcp(django_app):
    """One ASGI application: /mcp to the MCP server, lifespan to it too, the rest to Django."""
    mcp_app = mcp_http_app()
    gated = BearerGate(NoEventStream(JsonPostsOnly(JsonErrors(mcp_app))))

    async def application(scope, receive, send):
        if scope["type"] == "lifespan":
            await mcp_app(scope, receive, send)
        elif scope["type"] == "http" and _is_mcp(scope["path"]):
            await gated(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return application
