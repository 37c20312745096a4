"""A bound on the requests a web process works on at once (ASGI middleware).

Under ASGI, Django runs every request's sync code in a thread of its own, so
50 simultaneous searches become 50 threads, each holding a pooled database
connection while it waits for the CPU: the pool runs dry and requests fail
although the database is idle. Here requests beyond the limit wait in the
event loop (no thread, no connection), first come first served, and the ones
that waited longer than `max_wait` are answered 503 with `Retry-After` in the
API's error shape. `/healthz` and static files skip the queue, so a load
balancer still sees a loaded process as alive.

A request joins the queue once it has arrived: its body (the first READ_AHEAD_BYTES of it) is read before it
takes a place, so a client that sends its head and stalls holds a connection, never a place. As the web server's
gunicorn does (knowhub_site/slow_clients.py), at most `read_seconds` (KNOWHUB_REQUEST_READ_SECONDS) may pass
between two reads of a body: a body that stalls longer is answered 408 and its connection closed, whether it
stalled before its turn or, past READ_AHEAD_BYTES, during it.
"""
import asyncio
import json
import logging
import time

logger = logging.getLogger(__name__)

EXEMPT_PREFIXES = ("/healthz", "/static/")
# What a request may have read before its turn: an MCP call's or a search's body, many times over. Held in memory
# by each connection still waiting, so bounded; a longer body is read in its turn, as long as it keeps coming.
READ_AHEAD_BYTES = 64 * 1024


async def _error(send, status: int, code: str, message: str, headers=()) -> None:
    body = json.dumps({"error": {"code": code, "fields": {}, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers,
    ]})
    await send({"type": "http.response.body", "body": body})


async def _busy(send, retry_after: int) -> None:
    await _error(send, 503, "unavailable", f"the server is busy; retry in {retry_after}s",
                 [(b"retry-after", str(retry_after).encode())])


async def _too_slow(send, seconds: float) -> None:
    await _error(send, 408, "request_timeout", f"the request's body did not arrive within {seconds:g} s",
                 [(b"connection", b"close")])


class BodyStalled(Exception):
    """No part of a request's body came for `read_seconds`."""


class Arrival:
    """A request's body as it arrives: read ahead before the request takes a place, then handed to the application
    as it was received (`receive`); reads past what was read ahead wait `read_seconds` at most each."""

    def __init__(self, receive, read_seconds: float):
        self._receive = receive
        self.read_seconds = read_seconds
        self._ahead: list[dict] = []
        self.complete = False  # the body's last message was received
        self.stalled = False  # a read timed out while the application waited for it

    async def _next(self) -> dict:
        if self.read_seconds <= 0:
            return await self._receive()
        try:
            return await asyncio.wait_for(self._receive(), timeout=self.read_seconds)
        except TimeoutError:
            raise BodyStalled from None

    async def read_ahead(self, most: int) -> bool:
        """Read up to `most` bytes of the body (all of it when shorter); False when the client disconnected."""
        size = 0
        while not self.complete and size < most:
            message = await self._next()
            self._ahead.append(message)
            if message["type"] != "http.request":
                return False
            size += len(message.get("body", b""))
            self.complete = not message.get("more_body", False)
        return True

    async def receive(self) -> dict:
        if self._ahead:
            return self._ahead.pop(0)
        if self.complete:  # after the body: the client's disconnect, whenever it comes
            return await self._receive()
        try:
            message = await self._next()
        except BodyStalled:
            self.stalled = True
            return {"type": "http.disconnect"}  # the application stops reading; `ConcurrencyLimit` answers 408
        self.complete = message["type"] != "http.request" or not message.get("more_body", False)
        return message


class ConcurrencyLimit:
    """At most `limit` requests at once (None: no bound, only the body's deadline), each one once it has arrived."""

    def __init__(self, app, *, limit: int | None, max_wait: float, retry_after: int = 2, read_seconds: float = 0,
                 read_ahead: int = READ_AHEAD_BYTES):
        self.app = app
        self.limit = limit
        self.max_wait = max_wait
        self.retry_after = retry_after
        self.read_seconds = read_seconds
        self.read_ahead = read_ahead
        self._semaphore: asyncio.Semaphore | None = None  # made in the serving loop, on first use

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"].startswith(EXEMPT_PREFIXES):
            await self.app(scope, receive, send)
            return
        body = Arrival(receive, self.read_seconds)
        try:
            if not await body.read_ahead(self.read_ahead):
                return  # the client left before its request arrived: nobody to answer
        except BodyStalled:
            logger.info("408 %s %s: the body stalled for %ss before its turn", scope.get("method"), scope["path"],
                        self.read_seconds)
            await _too_slow(send, self.read_seconds)
            return
        if self.limit is None:
            await self._serve(scope, body, send)
            return
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.limit)
        queued_at = time.monotonic()
        try:
            await asyncio.wait_for(self._semaphore.acquire(), timeout=self.max_wait)
        except TimeoutError:
            logger.warning("shed %s %s after %.1fs in the queue", scope.get("method"), scope["path"],
                           time.monotonic() - queued_at)
            await _busy(send, self.retry_after)
            return
        try:
            await self._serve(scope, body, send)
        finally:
            self._semaphore.release()

    async def _serve(self, scope, body: Arrival, send) -> None:
        started = False

        async def sending(message):
            nonlocal started
            if body.stalled and not started:
                return  # the application's answer to the disconnect it was given: the client gets the 408
            started = True
            await send(message)

        await self.app(scope, body.receive, sending)
        if body.stalled and not started:
            logger.info("408 %s %s: the body stalled for %ss", scope.get("method"), scope["path"], self.read_seconds)
            await _too_slow(send, self.read_seconds)


def limited(app):
    """`app` behind the limit the settings give (one less than the pool, so /healthz always finds a connection;
    without a pool no limit), its bodies' reads bounded by KNOWHUB_REQUEST_READ_SECONDS as the web server's are."""
    from django.conf import settings

    from core.env import env_int

    limit = None
    if settings.KNOWHUB_DB_POOL:
        limit = settings.KNOWHUB_MAX_CONCURRENT_REQUESTS or max(1, settings.KNOWHUB_DB_POOL_MAX - 1)
    return ConcurrencyLimit(app, limit=limit, max_wait=settings.KNOWHUB_REQUEST_QUEUE_SECONDS,
                            read_seconds=env_int("KNOWHUB_REQUEST_READ_SECONDS", 30))
