"""The deadline bounds a call however the server stalls or trickles: its headers, an export, a job's polls. A loopback
socket server (`Trickle`) sends what each test scripts, as slowly as it likes."""
import asyncio
import socket
import threading
import time

import pytest

from knowhub_client import AsyncKnowHub, ConnectionFailed, JobTimeout, KnowHub, KnowHubError, RetryPolicy

EXPORT_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"


class Trickle:
    """Answers every connection with `send(sock)` after reading the request's head; closes all on `close()`."""

    def __init__(self, send):
        self.send, self.connections, self.closed = send, [], threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            self.send(conn, self.closed)
        except OSError:  # the client gave up
            pass

    def close(self):
        self.closed.set()
        self.listener.close()
        for conn in self.connections:
            conn.close()


def trickled_headers(conn, closed):
    """A header line every 0.1 s for 4 s (each read well within any timeout), then a reply."""
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    for _ in range(40):
        if closed.wait(0.1):
            return
        conn.sendall(b"X-Slow: 1\r\n")
    conn.sendall(b'Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}')


def stalled(conn, closed):
    closed.wait(30)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def trickled_export(conn, closed):
    """A valid export whose lines come every 0.1 s for 4 s."""
    conn.sendall(EXPORT_HEAD + chunk(b'{"kind": "knowhub-export"}\n'))
    for _ in range(40):
        if closed.wait(0.1):
            return
        conn.sendall(chunk(b'{"kind": "knowledge"}\n'))
    conn.sendall(b"0\r\n\r\n")


def slow_export(conn, closed):
    """A complete export taking about 0.6 s."""
    conn.sendall(EXPORT_HEAD + chunk(b'{"kind": "knowhub-export"}\n'))
    for _ in range(6):
        closed.wait(0.1)
        conn.sendall(chunk(b'{"kind": "knowledge"}\n'))
    conn.sendall(b"0\r\n\r\n")


def one_long_line(conn, closed):
    """An export whose second line never ends (200 KB sent, more to come)."""
    conn.sendall(EXPORT_HEAD + chunk(b'{"kind": "knowhub-export"}\n'))
    for _ in range(20):
        conn.sendall(chunk(b"x" * 10_000))
    closed.wait(30)


@pytest.fixture
def serve():
    servers = []

    def start(send):
        servers.append(Trickle(send))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_the_deadline_bounds_a_server_trickling_its_header_lines(serve):
    server = serve(trickled_headers)
    retry = RetryPolicy(retries=2, backoff=0.01)
    started = time.monotonic()
    with KnowHub(server.url, timeout=5, deadline=0.5, retry=retry) as hub, \
            pytest.raises(ConnectionFailed, match="deadline"):
        hub.knowledge_list()
    assert time.monotonic() - started < 1.5

    async def scenario():
        async with AsyncKnowHub(server.url, timeout=5, deadline=0.5, retry=retry) as hub:
            with pytest.raises(ConnectionFailed, match="deadline"):
                await hub.knowledge_list()

    started = time.monotonic()
    asyncio.run(scenario())
    assert time.monotonic() - started < 1.5


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_export_is_bounded_by_the_clients_deadline_unless_given_its_own(serve, asynchronous, tmp_path):
    trickling, slow = serve(trickled_export), serve(slow_export)

    def export(url, **kwargs):
        if not asynchronous:
            with KnowHub(url, timeout=5, deadline=0.3) as hub:
                return hub.knowledge_export(**kwargs)

        async def scenario():
            async with AsyncKnowHub(url, timeout=5, deadline=0.3) as hub:
                return await hub.knowledge_export(**kwargs)

        return asyncio.run(scenario())

    started = time.monotonic()
    with pytest.raises(ConnectionFailed, match="deadline"):
        export(trickling.url, output=tmp_path / "backup.jsonl")
    assert time.monotonic() - started < 1.3
    with pytest.raises(ConnectionFailed, match="deadline"):
        export(slow.url)
    assert len(export(slow.url, deadline=5)) == 7
    assert len(export(slow.url, deadline=None)) == 7


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_export_line_longer_than_the_size_limit_is_refused_not_buffered(serve, asynchronous, tmp_path):
    server = serve(one_long_line)

    def export():
        if not asynchronous:
            with KnowHub(server.url, timeout=5, deadline=10) as hub:
                hub.max_response_bytes = 50_000
                return hub.knowledge_export(tmp_path / "backup.jsonl")

        async def scenario():
            async with AsyncKnowHub(server.url, timeout=5, deadline=10) as hub:
                hub.max_response_bytes = 50_000
                return await hub.knowledge_export(tmp_path / "backup.jsonl")

        return asyncio.run(scenario())

    started = time.monotonic()
    with pytest.raises(KnowHubError, match="line 2 .* over 50000 bytes") as refused:
        export()
    assert refused.value.code == "response_too_large" and time.monotonic() - started < 5


def test_records_collected_in_memory_are_bounded_by_the_size_limit_but_a_file_is_not(tmp_path):
    from tests.clients.test_client_retries import Flaky

    lines = '{"kind": "knowhub-export"}\n' + "".join(f'{{"kind": "knowledge", "n": {n}, "pad": "{"x" * 900}"}}\n'
                                                  for n in range(10))
    flaky = Flaky([(200, {"Content-Type": "application/x-ndjson"}, lines)] * 2)
    try:
        with KnowHub(flaky.url) as hub:
            hub.max_response_bytes = 4096
            with pytest.raises(KnowHubError, match="give `output`") as refused:
                hub.knowledge_export()
            assert refused.value.code == "response_too_large"
            assert hub.knowledge_export(tmp_path / "backup.jsonl") == {"records": 11}
    finally:
        flaky.close()


def test_wait_for_job_against_a_stalled_server_times_out_after_its_own_timeout(serve):
    server = serve(stalled)
    started = time.monotonic()
    with KnowHub(server.url, timeout=30, deadline=120) as hub, pytest.raises(JobTimeout) as timed_out:
        hub.wait_for_job("3f2b8c1e-9d4a-4b7e-8f00-0c5a1b2c3d4e", timeout=1)
    assert time.monotonic() - started < 2.5
    assert timed_out.value.job == {"id": "3f2b8c1e-9d4a-4b7e-8f00-0c5a1b2c3d4e"}
    assert isinstance(timed_out.value.__cause__, ConnectionFailed)

    async def scenario():
        async with AsyncKnowHub(server.url, timeout=30, deadline=120) as hub:
            with pytest.raises(JobTimeout):
                await hub.wait_for_job("3f2b8c1e-9d4a-4b7e-8f00-0c5a1b2c3d4e", timeout=1)

    started = time.monotonic()
    asyncio.run(scenario())
    assert time.monotonic() - started < 2.5
