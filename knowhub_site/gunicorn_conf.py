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
- A request must arrive within REQUEST_READ_SECONDS of its first byte (`KNOWHUB_REQUEST_READ_SECONDS`, 30 by default):
  its head and its body. Each of a worker's threads reads one request to the end before it serves another, and gunicorn
  bounds only the wait for a connection's first byte, so a client that sent part of a request and stalled (a crashed
  agent mid-upload, a dropped link, a slowloris) held its thread for good: as many stalled connections as threads and
  the API answered nobody. Past the deadline, a request whose head is incomplete gets a 408 and its connection closes; a
  body still arriving ends the application's read with an error (the API answers 408 "request_timeout",
  core.errors). Behind a proxy that buffers requests (docs/DEPLOY.md) the deadline is never reached.
- A connection that closes after its response (the client said `Connection: close`, a body was left unread, a 408)
  lingers, as gunicorn's `util.close_graceful` has it, on a thread of its own (`Lingerer`) instead of the worker's
  event loop, where each client that did not close its side held every connection of the process for up to 2 s.
"""
import json
import os
import queue
import selectors
import socket
import threading
import time

from gunicorn import util
from gunicorn.http import message
from gunicorn.http.errors import NoMoreData
from gunicorn.http.parser import Parser
from gunicorn.http.unreader import SocketUnreader
from gunicorn.workers.gthread import TConn

from core.env import env_int

REQUEST_LINE_MAX = 64 * 1024

message.MAX_REQUEST_LINE = max(message.MAX_REQUEST_LINE, REQUEST_LINE_MAX)
limit_request_line = REQUEST_LINE_MAX

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


class RequestReadTimeout(TimeoutError):
    """The request did not arrive by its deadline. A TimeoutError: gunicorn's drain of an unread body stops on one,
    and Django turns it into UnreadablePostError when the application was reading the body."""


_read_chunk = SocketUnreader.chunk
_parse_next = Parser.__next__


def read_chunk_by_deadline(self, size_hint=None):
    """SocketUnreader.chunk, waiting on the socket no later than the request's deadline (set by parse_next)."""
    deadline = getattr(self, "deadline", None)
    if deadline is None:
        return _read_chunk(self, size_hint)
    left = deadline - time.monotonic()
    if left <= 0:
        raise RequestReadTimeout(f"the request did not arrive within {REQUEST_READ_SECONDS} s")
    previous = self.sock.gettimeout()
    self.sock.settimeout(left)
    try:
        return _read_chunk(self, size_hint)
    except TimeoutError as exc:
        raise RequestReadTimeout(f"the request did not arrive within {REQUEST_READ_SECONDS} s") from exc
    finally:
        self.sock.settimeout(previous)


def parse_next(self):
    """Parser.__next__ (the next request's head, read in a worker's thread), its request given REQUEST_READ_SECONDS
    from now to arrive. A head that does not is answered 408 and its connection closed."""
    self.unreader.deadline = time.monotonic() + REQUEST_READ_SECONDS
    try:
        return _parse_next(self)
    except RequestReadTimeout as exc:
        try:
            util.write_nonblock(self.unreader.sock, error_response(408, "Request Timeout", str(exc)))
        except OSError:
            pass
        raise NoMoreData() from exc  # the worker closes the connection, logged at debug level as a client gone


SocketUnreader.chunk = read_chunk_by_deadline
Parser.__next__ = parse_next


class Lingerer:
    """Closes connections as gunicorn's util.close_graceful does (RFC 9112 9.6: FIN, then read and drop what the client
    still sends until it closes its side, LINGER_SECONDS at most, so a last response is not cut short by a reset), all
    of them at once on one thread of the worker process, started with its first connection to close.

    gunicorn's threaded worker lingers on the thread that runs its event loop (accepting, handing requests to threads),
    one connection after another: ten clients that read their `Connection: close` answer and kept the socket open froze
    the process for 16 s, whatever its threads were free to do."""

    LINGER_SECONDS = 2.0
    DRAIN_MAX = 64 * 1024
    LINGERING_MAX = 1_000  # past it a connection closes at once, and the client may see a reset

    def __init__(self):
        self._lock = threading.Lock()
        self._pid = None  # the process whose thread runs: a forked worker starts its own

    def close(self, sock) -> None:
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # the client is gone already
            util.close(sock)
            return
        self._start()
        sock.setblocking(False)
        self._given.put(sock)
        try:
            os.write(self._wake, b"\0")
        except BlockingIOError:  # the pipe is full: the thread is awake and will find this one too
            pass

    def _start(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._given = queue.SimpleQueue()
            woken, self._wake = os.pipe()
            os.set_blocking(woken, False)
            os.set_blocking(self._wake, False)
            threading.Thread(target=self._run, args=(woken,), name="lingerer", daemon=True).start()

    def _run(self, woken: int) -> None:
        selector = selectors.DefaultSelector()
        selector.register(woken, selectors.EVENT_READ)
        lingering = {}  # socket -> [deadline, bytes drained]

        def done(sock):
            selector.unregister(sock)
            del lingering[sock]
            util.close(sock)

        while True:
            soonest = min((deadline for deadline, _ in lingering.values()), default=None)
            for key, _ in selector.select(None if soonest is None else max(soonest - time.monotonic(), 0)):
                if key.fileobj == woken:
                    try:
                        os.read(woken, 4096)
                    except BlockingIOError:
                        pass
                    while not self._given.empty():
                        sock = self._given.get()
                        if len(lingering) >= self.LINGERING_MAX:
                            util.close(sock)
                            continue
                        lingering[sock] = [time.monotonic() + self.LINGER_SECONDS, 0]
                        selector.register(sock, selectors.EVENT_READ)
                    continue
                sock = key.fileobj
                try:
                    data = sock.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                lingering[sock][1] += len(data)
                if not data or lingering[sock][1] >= self.DRAIN_MAX:
                    done(sock)
            now = time.monotonic()
            for sock in [sock for sock, (deadline, _) in lingering.items() if deadline <= now]:
                done(sock)


LINGERER = Lingerer()
_close_connection = TConn.close


def close_connection(self, graceful=False):
    """TConn.close, a graceful close handed to the LINGERER."""
    if graceful:
        LINGERER.close(self.sock)
    else:
        _close_connection(self, graceful)


TConn.close = close_connection
