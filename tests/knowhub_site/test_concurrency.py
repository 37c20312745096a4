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


async def call(app, path="/api/knowledge/search", receive=None):
    sent = []

    async def send(message):
        sent.append(message)

    async def arrived():
        return {"type": "http.request", "body": b"", "more_body": False}

    await app({"type": "http", "path": path, "method": "GET"}, receive or arrived, send)
    return sent


def stalling(*chunks: bytes):
    """A receive() that gives `chunks` (the body's first parts) and then nothing, ever."""
    given = list(chunks)

    async def receive():
        if given:
            return {"type": "http.request", "body": given.pop(0), "more_body": True}
        await asyncio.Event().wait()

    return receive


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


def test_a_request_whose_body_stalls_holds_no_place_and_gets_408():
    """A client that sent its head and part of its body, then nothing, waits outside the limit and is answered 408
    once `read_seconds` pass without a byte; meanwhile requests that arrived are served."""
    async def scenario():
        inner = SlowApp()
        inner.release.set()
        app = ConcurrencyLimit(inner, limit=1, max_wait=0.2, read_seconds=0.3)
        stalled = [asyncio.create_task(call(app, receive=stalling(b"{"))) for _ in range(3)]
        await asyncio.sleep(0.05)
        served = await call(app)
        return served, await asyncio.gather(*stalled), inner.most

    served, stalled, most = asyncio.run(scenario())
    assert served[0]["status"] == 200 and most == 1
    for start, body in stalled:
        assert start["status"] == 408 and (b"connection", b"close") in start["headers"]
        assert json.loads(body["body"])["error"]["code"] == "request_timeout"


def test_a_long_body_that_stalls_in_its_turn_gets_408_and_frees_its_place():
    """Past what is read ahead the body is read in the request's turn: a stall there ends the request with 408
    (the application was told the client left), and the next request gets the place."""
    class ReadingApp:
        async def __call__(self, scope, receive, send):
            while (message := await receive())["type"] == "http.request" and message.get("more_body"):
                pass
            if message["type"] == "http.disconnect":
                await send({"type": "http.response.start", "status": 500, "headers": []})  # never reaches the client
                return
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})

    async def scenario():
        app = ConcurrencyLimit(ReadingApp(), limit=1, max_wait=5, read_seconds=0.3, read_ahead=4)
        stalled = await call(app, receive=stalling(b"12345", b"678"))
        served = await call(app)
        return stalled, served

    stalled, served = asyncio.run(scenario())
    assert [m.get("status") for m in stalled if m["type"] == "http.response.start"] == [408]
    assert served[0]["status"] == 200


def test_a_body_that_arrives_is_handed_on_as_it_came():
    async def scenario():
        received = []

        async def app(scope, receive, send):
            while True:
                message = await receive()
                received.append(message)
                if not message.get("more_body"):
                    break
            await send({"type": "http.response.start", "status": 200, "headers": []})

        parts = [b"ab", b"cd", b"ef"]

        async def receive():
            return {"type": "http.request", "body": parts.pop(0), "more_body": bool(parts)}

        sent = await call(ConcurrencyLimit(app, limit=1, max_wait=1, read_seconds=1, read_ahead=3), receive=receive)
        return received, sent

    received, sent = asyncio.run(scenario())
    assert b"".join(m["body"] for m in received) == b"abcdef" and not received[-1]["more_body"]
    assert sent[0]["status"] == 200
