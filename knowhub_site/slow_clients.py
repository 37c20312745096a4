"""What the web server's gunicorn (threaded workers) does about clients that stall, installed by its configuration
(knowhub_site/gunicorn_conf.py loads this file by path; `install` patches gunicorn in the master, before the fork).

Each of a worker's threads reads one request to the end before it serves another, and gunicorn bounds only the wait
for a connection's first byte. A client that sent part of a request and stalled (a crashed agent mid-upload, a dropped
link, a slowloris) held its thread for good: as many stalled connections as threads and the API answered nobody.
Bounded here as nginx bounds its clients:

- a request's head must arrive within `seconds` of a thread starting to read it (nginx's client_header_timeout),
  else the client gets a 408 (the API's JSON error shape) and the connection closes;
- while a body is read, `seconds` may pass between two reads that get bytes (nginx's client_body_timeout), else the
  application's read fails: Django raises UnreadablePostError, which the API answers 408 "request_timeout". A body
  that arrived in full is read whenever the application gets to it; a steady upload takes as long as it takes.

Connections that close after their response (the client said `Connection: close`, a body was left unread, a 408)
linger as gunicorn's `util.close_graceful` has them, on a thread of the worker's own (`Lingerer`). gunicorn lingers on
the thread that runs its event loop, one connection after another: ten clients that kept their socket after a
`Connection: close` answer froze a worker for 16 s, whatever its threads were free to do.
"""
import logging
import os
import queue
import resource
import selectors
import socket
import threading
import time

from gunicorn import util
from gunicorn.http.errors import NoMoreData
from gunicorn.http.parser import Parser
from gunicorn.http.unreader import SocketUnreader
from gunicorn.workers.gthread import TConn

log = logging.getLogger("gunicorn.error")


class RequestReadTimeout(TimeoutError):
    """A request did not arrive in time. A TimeoutError: gunicorn's drain of an unread body stops on one, and Django
    turns it into UnreadablePostError when the application was reading the body."""


def install(seconds: int, error_response) -> None:
    """Bound reading requests by `seconds` (0 or less: no bound) and linger off the event loop. `error_response(status,
    reason, message)` is the HTTP response for a head that did not arrive. Installing again (gunicorn reads its
    configuration again on HUP) replaces the earlier installation instead of wrapping it."""
    originals = _originals()
    if seconds > 0:
        SocketUnreader.chunk = _reading_chunk(originals["chunk"], seconds)
        Parser.__next__ = _reading_head(originals["next"], seconds, error_response)
    else:
        SocketUnreader.chunk, Parser.__next__ = originals["chunk"], originals["next"]
    TConn.close = _closing(originals["close"])


def _originals() -> dict:
    if not hasattr(SocketUnreader, "_gunicorns"):
        SocketUnreader._gunicorns = {"chunk": SocketUnreader.chunk, "next": Parser.__next__, "close": TConn.close}
    return SocketUnreader._gunicorns


def _reading_chunk(read_chunk, seconds: int):
    def chunk(self, size_hint=None):
        """One read from the socket, waiting no longer than the head's deadline or, in a body, `seconds`."""
        deadline = getattr(self, "deadline", None)
        wait = seconds if deadline is None else max(deadline - time.monotonic(), 0.001)
        previous = self.sock.gettimeout()  # gunicorn's own drain of an unread body sets a shorter one
        self.sock.settimeout(wait if previous is None else min(wait, previous))
        try:
            return read_chunk(self, size_hint)
        except TimeoutError as exc:
            where = "the request's head" if deadline is not None else "its body"
            raise RequestReadTimeout(f"{where} did not arrive within {seconds} s") from exc
        finally:
            self.sock.settimeout(previous)

    return chunk


def _reading_head(parse_next, seconds: int, error_response):
    def next_request(self):
        """Parser.__next__ (the next request's head, read in a worker's thread), given `seconds` to arrive: a head that
        does not is answered 408 and its connection closed."""
        self.unreader.deadline = time.monotonic() + seconds
        try:
            return parse_next(self)
        except RequestReadTimeout as exc:
            log.info("408: %s (from %s)", exc, self.source_addr)
            try:
                util.write_nonblock(self.unreader.sock, error_response(408, "Request Timeout", str(exc)))
            except OSError:
                pass
            raise NoMoreData() from exc  # the worker closes the connection
        finally:
            self.unreader.deadline = None  # the body's reads wait `seconds` each

    return next_request


def _closing(close):
    def close_connection(self, graceful=False):
        """TConn.close, a graceful close handed to the LINGERER."""
        if graceful:
            LINGERER.close(self.sock)
        else:
            close(self, graceful)

    return close_connection


class Lingerer:
    """Closes connections as gunicorn's util.close_graceful does (RFC 9112 9.6: FIN, then read and drop what the client
    still sends until it closes its side, LINGER_SECONDS at most, so a last response is not cut short by a reset), all
    of them at once on one thread of the worker process, started with its first connection to close."""

    LINGER_SECONDS = 2.0
    DRAIN_MAX = 64 * 1024

    def __init__(self):
        self._lock = threading.Lock()
        self._pid = None  # the process whose thread runs: a forked worker starts its own
        self._thread = None
        self.lingering = 0
        # past it a connection closes at once (the client may see a reset): a share of the process's descriptors
        self.most = max(16, min(1_000, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 4))

    def close(self, sock) -> None:
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # the client is gone already
            util.close(sock)
            return
        if not self._running():
            util.close(sock)
            return
        sock.setblocking(False)
        self._given.put(sock)
        try:
            os.write(self._wake, b"\0")
        except BlockingIOError:  # the pipe is full: the thread is awake and will find this one too
            pass

    def wait(self, timeout: float) -> None:
        """Until no connection lingers, `timeout` seconds at most (a worker about to exit)."""
        deadline = time.monotonic() + timeout
        while self.lingering and time.monotonic() < deadline:
            time.sleep(0.05)

    def _running(self) -> bool:
        with self._lock:
            if self._pid != os.getpid() or self._thread is None or not self._thread.is_alive():
                try:
                    self._given = queue.SimpleQueue()
                    woken, self._wake = os.pipe()
                    os.set_blocking(woken, False)
                    os.set_blocking(self._wake, False)
                    self._thread = threading.Thread(target=self._run, args=(woken,), name="lingerer", daemon=True)
                    self._thread.start()
                except (OSError, RuntimeError):  # out of descriptors or threads: close at once
                    log.exception("cannot start the lingering thread")
                    return False
                self._pid = os.getpid()
        return True

    def _run(self, woken: int) -> None:
        selector = selectors.DefaultSelector()
        selector.register(woken, selectors.EVENT_READ)
        lingering = {}  # socket -> [deadline, bytes drained]

        def done(sock):
            try:
                selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            lingering.pop(sock, None)
            self.lingering = len(lingering)
            util.close(sock)

        while True:
            try:
                soonest = min((deadline for deadline, _ in lingering.values()), default=None)
                for key, _ in selector.select(None if soonest is None else max(soonest - time.monotonic(), 0)):
                    if key.fileobj == woken:
                        self._take(woken, selector, lingering)
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
            except Exception:  # noqa: BLE001 - a bug here must not leave sockets open for good
                log.exception("lingering connections: closing them")
                for sock in list(lingering):
                    done(sock)

    def _take(self, woken: int, selector, lingering: dict) -> None:
        try:
            os.read(woken, 4096)
        except BlockingIOError:
            pass
        while not self._given.empty():
            sock = self._given.get()
            if len(lingering) >= self.most or sock in lingering:
                util.close(sock)
                continue
            lingering[sock] = [time.monotonic() + self.LINGER_SECONDS, 0]
            selector.register(sock, selectors.EVENT_READ)
        self.lingering = len(lingering)


LINGERER = Lingerer()
