"""Typed errors carrying the server's `{"error": {"code", "message", "fields"}}`."""
from __future__ import annotations

import html
import re
from typing import Any


class KnowHubError(Exception):
    """Any failure talking to KnowHub. `message` is the server's own when it sent one.

    >>> try:
    ...     hub.knowledge_search("x", top_k=0)
    ... except BadRequest as exc:
    ...     exc.fields      # {"top_k": ["Ensure this value is greater than or equal to 1."]}
    """

    status: int | None = None

    def __init__(self, message: str, *, status: int | None = None, code: str = "error",
                 fields: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.status = status if status is not None else self.status
        self.code = code
        self.fields = fields or {}

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}" if self.status else self.message


class BadRequest(KnowHubError):
    """400: the input is wrong; `fields` names what."""
    status = 400


class AuthenticationFailed(KnowHubError):
    """401: no token, or an invalid or revoked one."""
    status = 401


class PermissionDenied(KnowHubError):
    """403: the token may not do this (write to a scope, reveal a secret)."""
    status = 403


class NotFound(KnowHubError):
    """404: nothing with that id is visible to this token."""
    status = 404


class Conflict(KnowHubError):
    """409: an id taken, no LLM configured, or an idempotency key reused for another request."""
    status = 409


class Gone(KnowHubError):
    """410: the secret expired."""
    status = 410


class PayloadTooLarge(KnowHubError):
    """413: the request body is over the server's limit."""
    status = 413


class RateLimited(KnowHubError):
    """429: too many calls (retried with backoff before this is raised)."""
    status = 429


class ServerError(KnowHubError):
    """5xx: the server failed (retried with backoff before this is raised when safe)."""
    status = 500


class ConnectionFailed(KnowHubError):
    """The server could not be reached, or did not answer in time."""


class InvalidArgument(KnowHubError, ValueError):
    """An argument the client cannot send as given (refused before any request); `fields` names it.

    The message never repeats the value: it may be a token, a passphrase or a secret.
    """

    def __init__(self, argument: str, problem: str):
        super().__init__(f"{argument}: {problem}", code="invalid_argument", fields={argument: [problem]})
        self.argument = argument


class JobFailed(KnowHubError):
    """A background job (evolve, slim) ended in `failed`; `job` is its last state."""

    def __init__(self, message: str, *, job: dict[str, Any]):
        super().__init__(message, code="job_failed")
        self.job = job


class JobTimeout(KnowHubError):
    """A job did not finish within the time given; `job` is its last state."""

    def __init__(self, message: str, *, job: dict[str, Any]):
        super().__init__(message, code="job_timeout")
        self.job = job


_BY_STATUS: dict[int, type[KnowHubError]] = {
    400: BadRequest, 401: AuthenticationFailed, 403: PermissionDenied, 404: NotFound, 409: Conflict,
    410: Gone, 413: PayloadTooLarge, 429: RateLimited,
}


def error_for(status: int, body: Any, fallback_text: str = "", content_type: str = "") -> KnowHubError:
    """The typed error for a non-2xx reply, with the server's message, code and fields.

    Other shapes (``{"detail": ...}``, ``{"error": "..."}``, a proxy's HTML page, plain text) keep a
    readable message: the string given, or the page's text without its markup, at most 500 characters.
    """
    error = body.get("error") if isinstance(body, dict) else None
    message, code, fields = "", "error", {}  # type: str, str, dict[str, Any]
    if isinstance(error, dict):
        message, code = str(error.get("message") or ""), str(error.get("code") or "error")
        given = error.get("fields")
        fields = given if isinstance(given, dict) else {}
    elif isinstance(body, dict):
        said = next((body[key] for key in ("error", "detail", "message") if isinstance(body.get(key), str)), "")
        message = said.strip()[:500]
    if not message and not isinstance(error, dict):
        message = _plain(fallback_text, content_type)[:500]
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else KnowHubError)
    return cls(message or f"HTTP {status}", status=status, code=code, fields=fields)


def _plain(text: str, content_type: str) -> str:
    """A reply's text for a message: an HTML page's words without tags, scripts or styles; whitespace collapsed."""
    text = text[:100_000]
    if "html" in content_type.lower() or re.match(r"\s*<(!doctype|html|head|body)\b", text, re.IGNORECASE):
        text = re.sub(r"<(script|style)\b.*?</\1\s*>", " ", text, flags=re.IGNORECASE | re.DOTALL)
        text = html.unescape(re.sub(r"<[^>]*>", " ", text))
    return " ".join(text.split())
