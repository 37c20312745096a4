"""A bound on the requests a web process works on at once (ASGI middleware).

Under ASGI, Django runs every request's sync code in a thread of its own, so
50 simultaneous searches become 50 threads, each holding a pooled database
connection while it waits for the CPU: the pool runs dry and requests fail
although the database is idle. Here requests beyond the limit wait in the
event loop (no thread, no connection), first come first served, and the ones
that waited longer than `max_wait` are answered 503 with `Retry-After` in the
API's error shape. `/healthz` and static files skip the queue, so a load
balancer still sees a loaded process as alive.
"""
import asyncio
import json
import logging
import time

logger = logging.getLogger(__name__)

EXEMPT_PREFIXES = ("/healthz", "/static/")


async def _busy(send, retry_after: int) -> None:
    body = json.dumps({"error": {"code": "unavailable", "fields": {},
                                 "message": f"the server is busy; retry in {retry_after}s"}}).encode()
    await send({"type": "http.response.start", "status": 503, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(retry_after).encode()),
    ]})
    await send({"type": "http.response.body", "body": body})


class ConcurrencyLimit:
    def __init__(self, app, *, limit: int, max_wait: float, retry_after: int = 2):
        self.app = app
        self.limit = limit
        self.max_wait = max_wait
        self.retry_after = retry_after
        self._semaphore: asyncio.Semaphore | None = None  # made in the serving loop, on first use

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"].startswith(EXEMPT_PREFIXES):
            await self.app(scope, receive, send)
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
            await self.app(scope, receive, send)
        finally:
            self._semaphore.release()


def limited(app):
    """`app` behind the limit the settings give (one less than the pool, so /healthz always finds a connection)."""
    from django.conf import settings

    if not settings.KNOWHUB_DB_POOL:
        return app
    limit = settings.KNOWHUB_MAX_CONCURRENT_REQUESTS or max(1, settings.KNOWHUB_DB_POOL_MAX - 1)
    return ConcurrencyLimit(app, limit=limit, max_wait=settings.KNOWHUB_REQUEST_QUEUE_SECONDS)
