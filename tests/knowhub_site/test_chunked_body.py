"""A chunked request body (no Content-Length) reaches Django whole, with its length declared (chunked_body.py); over
gunicorn, tests/reliability/test_load.py saves through one."""
import io
import json

import pytest
from gunicorn.http.errors import InvalidChunkSize

from knowhub_site.chunked_body import reading_chunked_bodies
from tests.knowhub_site.test_unread_body import ServerResponse


def echoing(seen):
    """A WSGI application that reads the declared body and remembers what it got."""

    def app(environ, start_response):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        seen.append((environ.get("CONTENT_LENGTH"), environ["wsgi.input"].read(length)))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    return app


class Trickle(io.RawIOBase):
    """gunicorn's de-chunked body as a slow client sends it: a few bytes a read."""

    def __init__(self, data: bytes, step: int = 7, fail: Exception | None = None):
        self._data, self._step, self._fail = data, step, fail

    def read(self, size=-1):
        if not self._data and self._fail is not None:
            raise self._fail
        size = self._step if size is None or size < 0 else min(size, self._step)
        chunk, self._data = self._data[:size], self._data[size:]
        return chunk


def call(body, *, content_type="application/json", length=None, chunked=True):
    seen, server = [], ServerResponse()
    environ = {"wsgi.input": body if not isinstance(body, bytes) else Trickle(body), "CONTENT_TYPE": content_type}
    if chunked:
        environ["HTTP_TRANSFER_ENCODING"] = "chunked"
    if length is not None:
        environ["CONTENT_LENGTH"] = str(length)
    reply = b"".join(reading_chunked_bodies(echoing(seen))(environ, server.start_response))
    return server, seen, reply


def test_a_chunked_body_reaches_the_application_whole_with_its_length():
    body = json.dumps({"task": "chunked", "content": "x" * 5_000, "types": ["tool"]}).encode()
    server, seen, reply = call(body)
    assert seen == [(str(len(body)), body)]
    assert reply == b"ok" and not server.closes


def test_a_body_with_a_declared_length_or_none_at_all_is_left_alone():
    server, seen, _ = call(io.BytesIO(b"abc"), length=3, chunked=False)
    assert seen == [("3", b"abc")]
    _, seen, _ = call(io.BytesIO(b""), chunked=False)
    assert seen == [(None, b"")]


@pytest.mark.parametrize("content_type", ["application/json", "multipart/form-data; boundary=x"])
def test_a_chunked_body_over_its_limit_is_refused_413_unread_and_the_connection_closes(settings, content_type):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000
    settings.KNOWHUB_IMPORT_MAX_BYTES = settings.KNOWHUB_DOCUMENT_MAX_BYTES = 0  # a form's room alone: FORM_ROOM
    limit = 1_000 if content_type == "application/json" else 1024 * 1024
    stream = Trickle(b"x" * (limit + 50_000), step=4096)
    server, seen, reply = call(stream, content_type=content_type)
    assert seen == []  # the application never ran
    assert server.started[0].startswith("413") and dict(server.started[1])["Content-Type"] == "application/json"
    error = json.loads(reply)["error"]
    assert error["code"] == "too_large" and f"{limit:,}" in error["message"]
    assert server.closes
    assert len(stream._data) >= 50_000 - 4096  # the rest was not read


def test_a_multipart_upload_may_be_larger_than_an_ordinary_body(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000
    settings.KNOWHUB_IMPORT_MAX_BYTES = 20_000
    body = b"--x\r\n" + b"y" * 15_000 + b"\r\n--x--\r\n"
    server, seen, _ = call(body, content_type="multipart/form-data; boundary=x")
    assert seen == [(str(len(body)), body)] and not server.closes


def test_a_chunked_body_that_stalls_is_a_408_and_a_malformed_one_a_400():
    server, seen, reply = call(Trickle(b'{"task": "stal', fail=TimeoutError("read deadline")))
    assert seen == [] and server.started[0].startswith("408") and server.closes
    assert json.loads(reply)["error"]["code"] == "request_timeout"
    server, seen, reply = call(Trickle(b'{"task"', fail=InvalidChunkSize(b"zz")))
    assert seen == [] and server.started[0].startswith("400") and server.closes
    assert json.loads(reply)["error"]["code"] == "invalid"
