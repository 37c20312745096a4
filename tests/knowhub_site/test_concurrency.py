"""The per-process request bound: excess requests wait without a thread, then get 503 + Retry-After."""
import asyncio
import json

from knowhub_site.concurrency import ConcurrencyLimit


class SlowApp:
    def __init__(self):
        self.running = 0
        self.most = 0
        self.release = asyncio.Event()

    async def __call__(self, scope, receive, send):
        self.running += 1
        self.most = max(self.most, self.running)
        await self.release.wait()
        self.running -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def call(app, path="/api/knowledge/search"):
    sent = []

    async def send(message):
        sent.append(message)

    await app({"type": "http", "path": path, "method": "GET"}, None, send)
    return sent


def test_requests_beyond_the_limit_wait_their_turn_and_all_finish():
    async def scenario():
        inner = SlowApp()
        app = ConcurrencyLimit(inner, limit=3, max_wait=5)
        calls = [asyncio.create_task(call(app)) for _ in range(10)]
        await asyncio.sleep(0.05)
        assert inner.running == 3
        inner.release.set()
        replies = await asyncio.gather(*calls)
        return inner, replies

    inner, replies = asyncio.run(scenario())
    assert inner.most == 3
    assert [r[0]["status"] for r in replies] == [200] * 10


def test_a_request_that_waited_too_long_gets_503_with_retry_after_in_the_api_error_shape():
    async def scenario():
        inner = SlowApp()
        app = ConcurrencyLimit(inner, limit=1, max_wait=0.1, retry_after=2)
        first = asyncio.create_task(call(app))
        await asyncio.sleep(0.02)
        shed = await call(app)
        inner.release.set()
        await first
        return shed

    start, body = asyncio.run(scenario())
    assert start["status"] == 503
    assert (b"retry-after", b"2") in start["headers"]
    assert json.loads(body["body"])["error"]["code"] == "unavailable"


def test_health_checks_and_static_files_skip_the_queue():
    async def scenario():
        inner = SlowApp()
        app = ConcurrencyLimit(inner, limit=1, max_wait=5)
        busy = asyncio.create_task(call(app))
        await asyncio.sleep(0.02)
        health = asyncio.create_task(call(app, "/healthz"))
        await asyncio.sleep(0.02)
        running_with_health = inner.running
        inner.release.set()
        await asyncio.gather(busy, health)
        return running_with_health

    assert asyncio.run(scenario()) == 2
