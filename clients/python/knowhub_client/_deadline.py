"""The deadline in the socket: every read and write of a call ends by its deadline, however the server trickles.

httpcore gives each socket read the read timeout afresh, so a server sending a header line a second would hold a
call for ever though no read times out. The sync client reads through `_DeadlineStream`s that cut each operation's
timeout to what is left of the call (`bounded_by` says which call); the async client cancels the attempt (`within`).
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import httpcore
import httpx

from knowhub_client._transport import Deadline

T = TypeVar("T")

# The deadline of the call this thread or task is sending, read by `_DeadlineStream` on every socket operation.
_CALL_DEADLINE: ContextVar[Deadline | None] = ContextVar("knowhub_call_deadline", default=None)


@contextmanager
def bounded_by(deadline: Deadline) -> Iterator[None]:
    """Every read and write of the sync client's sockets inside ends by `deadline` (see `deadline_transport`)."""
    token = _CALL_DEADLINE.set(deadline)
    try:
        yield
    finally:
        _CALL_DEADLINE.reset(token)


async def within(deadline: Deadline, work: Awaitable[T]) -> T:
    """The async client's bound: `work` (an attempt, its reply's body read too) cancelled at the deadline, however
    the server trickles its bytes, as httpx.ReadTimeout."""
    left = deadline.left()
    if left is None:
        return await work
    try:
        return await asyncio.wait_for(work, max(left, 0.001))
    except asyncio.TimeoutError:
        raise httpx.ReadTimeout(_past(deadline)) from None


def _within_deadline(timeout: float | None, expired: type[Exception]) -> float | None:
    """`timeout` cut to what is left of the call's deadline; `expired` raised when nothing is."""
    deadline = _CALL_DEADLINE.get()
    left = None if deadline is None else deadline.left()
    if deadline is None or left is None:
        return timeout
    if left <= 0:
        raise expired(_past(deadline))
    return left if timeout is None else min(timeout, left)


def _past(deadline: Deadline) -> str:
    return f"no complete reply within the {deadline.seconds:g} s deadline"


@contextmanager
def _said_as_deadline() -> Iterator[None]:
    """A socket timeout that ends at the deadline, told as the deadline's."""
    try:
        yield
    except (httpcore.ReadTimeout, httpcore.WriteTimeout, httpcore.ConnectTimeout) as exc:
        deadline = _CALL_DEADLINE.get()
        left = None if deadline is None else deadline.left()
        if deadline is None or left is None or left > 0.01:
            raise
        raise type(exc)(_past(deadline)) from None


class _DeadlineStream(httpcore.NetworkStream):
    """A socket whose every operation waits at most `timeout` and never past the call's deadline: httpcore gives
    each read the read timeout afresh, so a server trickling header lines would otherwise hold a call forever."""

    def __init__(self, stream: httpcore.NetworkStream):
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        cut = _within_deadline(timeout, httpcore.ReadTimeout)
        with _said_as_deadline():
            return self._stream.read(max_bytes, cut)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        cut = _within_deadline(timeout, httpcore.WriteTimeout)
        with _said_as_deadline():
            self._stream.write(buffer, cut)

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        cut = _within_deadline(timeout, httpcore.ConnectTimeout)
        with _said_as_deadline():
            return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, cut))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, backend: httpcore.NetworkBackend):
        self._backend = backend

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        cut = _within_deadline(timeout, httpcore.ConnectTimeout)
        with _said_as_deadline():
            return _DeadlineStream(self._backend.connect_tcp(host, port, cut, local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        cut = _within_deadline(timeout, httpcore.ConnectTimeout)
        with _said_as_deadline():
            return _DeadlineStream(self._backend.connect_unix_socket(path, cut, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def deadline_transport(transport: httpx.BaseTransport | None) -> httpx.BaseTransport:
    """httpx's transport (or the one given) with its sockets bounded by the call's deadline (`bounded_by`).

    httpx has no public hook for its network backend, so this swaps the pool's; a transport without one (a mock,
    a custom class) is returned as it is, and only `Body`'s check between chunks bounds its replies.
    """
    transport = transport if transport is not None else httpx.HTTPTransport()
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if isinstance(backend, httpcore.NetworkBackend) and not isinstance(backend, _DeadlineBackend):
        pool._network_backend = _DeadlineBackend(backend)  # type: ignore[union-attr]
    return transport
