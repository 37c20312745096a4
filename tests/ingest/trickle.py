"""A server on loopback that answers every connection one response header line at a time, slowly enough that no
per-read timeout ever trips, and records when the client closed the connection (the tests of the overall deadline)."""
from __future__ import annotations

import select
import socket
import threading
import time


class Trickler:
    """Each connection gets "HTTP/1.1 200 OK" and then one header line every `every` seconds for `duration` seconds
    (whatever it sent is read and ignored). `closed` is set when a client closes its connection; `closed_after` holds,
    per connection, the seconds from the accept to that close (None: still open when the server gave up on it)."""

    def __init__(self, every: float = 0.3, duration: float = 10.0, host: str = "127.0.0.1"):
        self.every, self.duration = every, duration
        self.listener = socket.create_server((host, 0))
        self.listener.settimeout(0.1)
        self.url = f"http://{host}:{self.listener.getsockname()[1]}"
        self.closed_after: list[float | None] = []
        self.closed = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> Trickler:
        self._start(self._accept)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(2)
        self.listener.close()

    def _start(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, name="trickler", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except (TimeoutError, OSError):
                continue
            self._start(self._trickle, connection)

    def _trickle(self, connection: socket.socket) -> None:
        accepted = time.monotonic()
        index = len(self.closed_after)
        self.closed_after.append(None)
        lines = [b"HTTP/1.1 200 OK\r\n"] + [b"X-Trickle-%d: %s\r\n" % (n, b"z" * 8)
                                           for n in range(int(self.duration / self.every))]
        with connection:
            for line in lines:
                try:
                    connection.sendall(line)
                except OSError:
                    return self._closed(index, accepted)
                next_line = time.monotonic() + self.every
                while (left := next_line - time.monotonic()) > 0 and not self._stop.is_set():
                    if select.select([connection], [], [], left)[0]:
                        try:
                            if not connection.recv(65536):  # the client's FIN
                                return self._closed(index, accepted)
                        except OSError:  # its RST
                            return self._closed(index, accepted)
                if self._stop.is_set():
                    return None
        return None

    def _closed(self, index: int, accepted: float) -> None:
        self.closed_after[index] = time.monotonic() - accepted
        self.closed.set()


def fetch_threads() -> list[threading.Thread]:
    """The threads `ingest.fetch` runs its requests in that are still alive."""
    return [thread for thread in threading.enumerate() if thread.name == "ingest-fetch" and thread.is_alive()]
