"""Request bodies sent in chunks (`Transfer-Encoding: chunked`, no Content-Length), read before Django sees them.

Django reads a request's body up to its declared length, and a chunked request declares none: Django read it as
empty, so a chunked `POST /api/knowledge` (curl with `-H 'Transfer-Encoding: chunked'`, a client streaming its body)
was answered "task: This field is required." and a chunked PUT changed nothing. gunicorn de-chunks the body on
`wsgi.input`; here it is read into a spooled file (in memory up to DATA_UPLOAD_MAX_MEMORY_SIZE, on disk past it) and
its length declared, so Django, DRF and `unread_body` see an ordinary request. A body may be as large as Django takes
it: a multipart upload up to the larger of the import and document limits (plus room for its form fields), any other
body DATA_UPLOAD_MAX_MEMORY_SIZE. Past that the rest is not read: 413 in the API's error shape, and the connection
is closed (see `unread_body`), as for a declared body over the limit.
"""
import json
import tempfile

from django.conf import settings
from django.utils.translation import gettext as _
from gunicorn.http.errors import NoMoreData, ParseException

from core.errors import body_not_received_message, body_too_large_message, error_payload
from knowhub_site.unread_body import force_close_of

READ_SIZE = 64 * 1024
FORM_ROOM = 1024 * 1024  # a multipart body's boundaries and its other fields, beside the file


def body_limit(content_type: str) -> int:
    """The most bytes a chunked body of `content_type` may hold."""
    if content_type.lower().startswith("multipart/"):
        largest_file = max(settings.KNOWHUB_IMPORT_MAX_BYTES, settings.KNOWHUB_DOCUMENT_MAX_BYTES)
        return max(largest_file + FORM_ROOM, settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def is_chunked(environ) -> bool:
    return "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower() and not environ.get("CONTENT_LENGTH")


def reading_chunked_bodies(app):
    """The WSGI application `app`, given a chunked request's body whole with its length declared."""

    def application(environ, start_response):
        if not is_chunked(environ) or "wsgi.input" not in environ:
            return app(environ, start_response)
        limit = body_limit(environ.get("CONTENT_TYPE", ""))
        body = tempfile.SpooledTemporaryFile(max_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        try:
            size = _read_into(body, environ["wsgi.input"], limit)
        except TimeoutError:  # the read deadline between two reads (slow_clients): as Django's 408 for a declared body
            body.close()
            return _refused(start_response, "408 Request Timeout", "request_timeout", body_not_received_message())
        except (ParseException, NoMoreData):  # a chunk's size or terminator malformed, or the body ended mid-chunk
            body.close()
            return _refused(start_response, "400 Bad Request", "invalid", _("the request's chunked body is malformed"))
        if size > limit:
            body.close()
            return _refused(start_response, "413 Request Entity Too Large", "too_large", body_too_large_message(limit))
        body.seek(0)
        environ["wsgi.input"], environ["CONTENT_LENGTH"] = body, str(size)  # the spool is freed with the request
        return app(environ, start_response)

    return application


def _read_into(body, stream, limit: int) -> int:
    """Copy `stream` into `body` up to `limit` + 1 bytes; the bytes copied."""
    size = 0
    while size <= limit:
        chunk = stream.read(min(READ_SIZE, limit + 1 - size))
        if not chunk:
            break
        body.write(chunk)
        size += len(chunk)
    return size


def _refused(start_response, status: str, code: str, message: str) -> list[bytes]:
    """An answer in the API's error shape, on a connection then closed: the rest of the body may still be coming."""
    force_close = force_close_of(start_response)
    if force_close is not None:
        force_close()
    payload = json.dumps({"error": error_payload(code, message)}).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
    return [payload]
