"""The one request path: auth, timeouts, retries with backoff, errors mapped to typed exceptions.

Sync and async clients share everything here but the sending and the sleeping.
What may be retried: 429, 5xx and transport errors for idempotent calls (reads,
searches, saves and feedback carrying an Idempotency-Key the server honours); a connect
error (the request never left) for any call. A non-idempotent write (an edit, slim) is
never sent twice, unless the server rolled it back as a collision with another write
(503 `write_conflict`: nothing was written).

A call's `Deadline` bounds it in all: no retry starts, and no wait ends, after it; an attempt's
timeouts are cut to what is left, and a reply still arriving then is abandoned. A reply's body is
read up to a size limit, so a huge or endless one is refused instead of filling memory.
"""
from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from knowhub_client.errors import ConnectionFailed, InvalidArgument, KnowHubError, error_for

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RESPONSE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Call:
    """One API call, described before it is sent."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    idempotent: bool = False
    headers: dict[str, str | bytes] = field(default_factory=dict)  # bytes: sent as they are (UTF-8 beyond ASCII)


@dataclass(frozen=True)
class RetryPolicy:
    """`retries` extra attempts, waiting backoff·2^n (capped, with jitter) or the server's Retry-After.

    Retry-After is seconds or an HTTP date, capped at `max_backoff` (a date past is no wait); a value that
    is neither, or negative, NaN or infinite, is ignored for the backoff. The client's ``deadline`` bounds
    all attempts and waits together.
    """

    retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 8.0

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        told = retry_after_seconds(response.headers.get("Retry-After") if response is not None else None)
        if told is not None:
            return max(0.0, min(told, self.max_backoff))
        base: float = min(self.backoff * (2 ** attempt), self.max_backoff)
        return max(0.0, base * (0.5 + random.random() / 2))


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header as seconds from now (0 for a date past), or None when absent or junk."""
    if not value or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:  # "-0000": UTC
            when = when.replace(tzinfo=timezone.utc)
        return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


class Deadline:
    """When a call must be over, across its attempts and waits; `seconds` None is never."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.end = None if seconds is None else time.monotonic() + seconds

    def left(self) -> float | None:
        return None if self.end is None else self.end - time.monotonic()

    def allows(self, wait: float) -> bool:
        """Whether a retry after waiting `wait` seconds would still start in time."""
        return self.end is None or time.monotonic() + wait < self.end

    def timeout(self, timeout: Any) -> httpx.Timeout:
        """The client's timeout for one attempt, each part cut to the time left."""
        full = httpx.Timeout(timeout)
        left = self.left()
        if left is None:
            return full
        left = max(left, 0.001)

        def cut(value: float | None) -> float:
            return left if value is None else min(value, left)

        return httpx.Timeout(connect=cut(full.connect), read=cut(full.read), write=cut(full.write),
                             pool=cut(full.pool))


class Body:
    """A reply's body read chunk by chunk: refused past `limit` bytes (decoded), abandoned past the deadline."""

    def __init__(self, response: httpx.Response, limit: int, deadline: Deadline):
        self.response, self.limit, self.deadline, self.data = response, limit, deadline, bytearray()
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit and not response.headers.get("Content-Encoding"):
            raise too_large(response, limit)

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > self.limit:
            raise too_large(self.response, self.limit)
        left = self.deadline.left()
        if left is not None and left <= 0:
            raise httpx.ReadTimeout(f"no complete reply within the {self.deadline.seconds:g} s deadline",
                                    request=self.response.request)


def shown_url(url: Any) -> str:
    """A URL for a message: a password in it (``http://user:PW@host``) replaced by ``***``."""
    try:
        parsed = httpx.URL(str(url))
    except (httpx.InvalidURL, TypeError, ValueError):
        return "<invalid URL>"
    if parsed.password:
        parsed = parsed.copy_with(userinfo=parsed.userinfo.partition(b":")[0] + b":***")
    return str(parsed)


def too_large(response: httpx.Response, limit: int) -> KnowHubError:
    return KnowHubError(f"the reply from {shown_url(response.request.url)} is over {limit} bytes (max_response_bytes)",
                        status=response.status_code, code="response_too_large")


def _forbidden_in_header(value: str | bytes, *, ascii_only: bool) -> str | None:
    """Why `value` cannot be a header's value (as h11 checks it), or None when it can."""
    data = value if isinstance(value, bytes) else value.encode("utf-8", errors="surrogatepass")
    if ascii_only and any(byte > 0x7E for byte in data):
        return "must be ASCII"
    if any(byte < 0x20 or byte == 0x7F for byte in data):
        return "holds a control character (a line break, NUL, ...) that HTTP does not allow in a header"
    if data != data.strip(b" "):
        return "must not begin or end with a space"
    return None


def check_header(argument: str, value: str | bytes, *, ascii_only: bool = True) -> None:
    """`value` checked for a header: an `InvalidArgument` naming `argument` (never the value, a secret perhaps)
    where HTTP forbids it. Unchecked, httpx's error would carry the whole value into every message and log."""
    problem = _forbidden_in_header(value, ascii_only=ascii_only)
    if problem:
        raise InvalidArgument(argument, problem)


def wire_headers(headers: dict[str, str | bytes]) -> list[tuple[bytes, bytes]]:
    """A call's headers as httpx sends them: text in ASCII, bytes as they are (a UTF-8 passphrase)."""
    return [(name.encode("ascii"), value if isinstance(value, bytes) else value.encode("ascii"))
            for name, value in headers.items()]


def headers_for(token: str | None, user_agent: str) -> dict[str, str]:
    """The client's own headers. A token's surrounding whitespace (a file's newline) goes; one it cannot send
    is refused here, when the client is built, by name."""
    headers = {"Accept": "application/json", "User-Agent": user_agent}
    if token is not None and not isinstance(token, str):
        raise InvalidArgument("token", f"must be a string, not {type(token).__name__}")
    token = (token or "").strip()
    if token:
        check_header("token", token)
        headers["Authorization"] = f"Bearer {token}"
    return headers


MAX_DEPTH = 100


def check_sendable(call: Call) -> None:
    """Refuse, naming the argument, what JSON or a URL cannot carry: NaN and infinities (JSON has none), text
    that is not Unicode (a lone surrogate), nesting deeper than `MAX_DEPTH`. Iterative: depth cannot crash it."""
    pending: list[tuple[Any, str, int]] = [(value, str(key), 1) for key, value in (call.params or {}).items()]
    if isinstance(call.json, dict):
        pending += [(value, str(key), 1) for key, value in call.json.items()]
    elif call.json is not None:
        pending.append((call.json, "body", 0))
    while pending:
        value, where, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise InvalidArgument(where.split(".")[0].split("[")[0], f"is nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidArgument(where, "must be a finite number (not NaN or infinity)")
        if isinstance(value, str):
            _check_text(value, where)
        elif isinstance(value, dict):
            for key, inner in value.items():
                if isinstance(key, str):
                    _check_text(key, where)
                pending.append((inner, f"{where}.{key}", depth + 1))
        elif isinstance(value, (list, tuple)):
            pending += [(inner, f"{where}[{n}]", depth + 1) for n, inner in enumerate(value)]


def _check_text(value: str, where: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(where, "holds a character that is not Unicode text (a lone surrogate)") from None


def clean_params(params: dict[str, Any] | None) -> dict[str, Any] | None:
    """Query parameters without Nones; lists become the server's comma form (`_calls` refuses an element
    holding a comma, which would arrive as two)."""
    if not params:
        return None
    return {k: ",".join(v) if isinstance(v, (list, tuple)) else v for k, v in params.items() if v is not None}


def retry_after_response(call: Call, response: httpx.Response, attempt: int, policy: RetryPolicy,
                         content: bytes = b"") -> float | None:
    """Seconds to wait before the next attempt, or None to stop and return/raise. A write the server rolled back
    because it collided with another (503 `write_conflict`: nothing was written) is retried whatever the call."""
    retryable = call.idempotent or (response.status_code == 503 and _code_of(content) == "write_conflict")
    if response.status_code in RETRY_STATUSES and retryable and attempt < policy.retries:
        return policy.delay(attempt, response)
    return None


def _code_of(content: bytes) -> str | None:
    try:
        error = json.loads(content).get("error")
    except (ValueError, RecursionError, AttributeError):
        return None
    return error.get("code") if isinstance(error, dict) else None


def retry_after_error(call: Call, exc: httpx.TransportError, attempt: int, policy: RetryPolicy) -> float | None:
    if isinstance(exc, httpx.LocalProtocolError):  # the request itself cannot be sent: no retry will do better
        return None
    never_sent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
    if (never_sent or call.idempotent) and attempt < policy.retries:
        return policy.delay(attempt, None)
    return None


def connection_failed(call: Call, exc: httpx.TransportError, base_url: str) -> KnowHubError:
    """The error to raise for a transport failure: `ConnectionFailed`, chained to it. httpx's LocalProtocolError (a
    request HTTP cannot carry) is no connection failure, and its text holds the offending header's value (a token,
    perhaps), so it is neither shown nor chained."""
    where = f"{call.method} {shown_url(base_url)}{call.path}"
    if isinstance(exc, httpx.LocalProtocolError):
        failure: KnowHubError = KnowHubError(f"{where} could not be sent: it is not valid HTTP (a header value "
                                             "holds a character HTTP does not allow)", code="invalid_request")
        failure.__cause__ = None
    else:
        failure = ConnectionFailed(f"{where} failed: {type(exc).__name__}: {exc}".strip(": "))
        failure.__cause__ = exc
    failure.__suppress_context__ = True  # `raise` inside the except block must not chain what was left out
    return failure


_KINDS = {type(None): "null", list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def result_of(response: httpx.Response, content: bytes | None = None) -> dict[str, Any]:
    """The JSON object of a 2xx reply, or the typed error for anything else. `content` is the body when it was
    read by `Body` (else the response's own). Every endpoint answers an object (exports stream apart), so a 2xx
    with anything else (empty, a list, a string) is a server or a proxy answering something other than the API."""
    content = response.content if content is None else content
    try:
        body = json.loads(content) if content else None
    except (ValueError, RecursionError):  # not JSON, or nested too deep to parse
        body = None
    if response.is_success:
        url = shown_url(response.request.url)
        if body is None and content.strip() not in (b"", b"null"):
            raise KnowHubError(f"expected JSON from {url}, got {response.headers.get('content-type')}",
                               status=response.status_code)
        if not isinstance(body, dict):
            got = "an empty body" if not content.strip() else f"JSON {_KINDS.get(type(body), type(body).__name__)}"
            raise KnowHubError(f"expected JSON (an object) from {url}, got {got}", status=response.status_code)
        return body
    text = content.decode(response.encoding or "utf-8", errors="replace")
    raise error_for(response.status_code, body, text, response.headers.get("content-type", ""))
