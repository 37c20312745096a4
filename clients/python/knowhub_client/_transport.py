"""The one request path: auth, timeouts, retries with backoff, errors mapped to typed exceptions.

Sync and async clients share everything here but the sending and the sleeping.
What may be retried: 429, 5xx and transport errors for idempotent calls (reads,
searches, saves carrying an Idempotency-Key the server honours); a connect error
(the request never left) for any call. A non-idempotent write (feedback, slim) is
never sent twice.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import httpx

from knowhub_client.errors import ConnectionFailed, KnowHubError, error_for

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Call:
    """One API call, described before it is sent."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    idempotent: bool = False
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RetryPolicy:
    """`retries` extra attempts, waiting backoff·2^n (capped, with jitter) or the server's Retry-After."""

    retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 8.0

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        retry_after: str | None = response.headers.get("Retry-After") if response is not None else None
        if retry_after:
            try:
                return min(float(retry_after), self.max_backoff)
            except ValueError:
                pass
        base: float = min(self.backoff * (2 ** attempt), self.max_backoff)
        return base * (0.5 + random.random() / 2)


def headers_for(token: str | None, user_agent: str) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": user_agent}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def clean_params(params: dict[str, Any] | None) -> dict[str, Any] | None:
    """Query parameters without Nones; lists become the server's comma form."""
    if not params:
        return None
    return {k: ",".join(v) if isinstance(v, (list, tuple)) else v for k, v in params.items() if v is not None}


def retry_after_response(call: Call, response: httpx.Response, attempt: int, policy: RetryPolicy) -> float | None:
    """Seconds to wait before the next attempt, or None to stop and return/raise."""
    if response.status_code in RETRY_STATUSES and call.idempotent and attempt < policy.retries:
        return policy.delay(attempt, response)
    return None


def retry_after_error(call: Call, exc: httpx.TransportError, attempt: int, policy: RetryPolicy) -> float | None:
    never_sent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
    if (never_sent or call.idempotent) and attempt < policy.retries:
        return policy.delay(attempt, None)
    return None


def connection_failed(call: Call, exc: httpx.TransportError, base_url: str) -> ConnectionFailed:
    return ConnectionFailed(f"{call.method} {base_url}{call.path} failed: {type(exc).__name__}: {exc}".strip(": "))


def result_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON body of a 2xx reply, or the typed error for anything else."""
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = None
    if response.is_success:
        if body is None and response.content:
            raise KnowHubError(f"expected JSON from {response.request.url}, got {response.headers.get('content-type')}",
                               status=response.status_code)
        return body if isinstance(body, dict) else {"result": body}
    raise error_for(response.status_code, body, response.text)
