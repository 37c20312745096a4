"""A response that left part of the request's body unread asks the server to close the connection (unread_body.py);
over gunicorn, tests/reliability/test_load.py sends the next request on the same connection."""
import io

from knowhub_site.unread_body import closing_after_unread_body


class ServerResponse:
    """What gunicorn hands the application: `start_response` bound to its response, which can be told to close."""

    def __init__(self):
        self.closes = False
        self.started = None

    def start_response(self, status, headers, *exc_info):
        self.started = (status, headers, exc_info)

    def force_close(self):
        self.closes = True


def reading(amount):
    """A WSGI application that reads `amount` bytes of the body (all of it: None) before answering."""

    def app(environ, start_response):
        stream = environ["wsgi.input"]
        stream.read() if amount is None else stream.read(amount)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    return app


def call(app, body: bytes, *, length=None):
    server = ServerResponse()
    environ = {"CONTENT_LENGTH": str(len(body) if length is None else length), "wsgi.input": io.BytesIO(body)}
    assert list(closing_after_unread_body(app)(environ, server.start_response)) == [b"ok"]
    assert server.started[0] == "200 OK"
    return server


def test_a_response_to_a_body_read_whole_keeps_the_connection():
    assert not call(reading(None), b"x" * 1000).closes


def test_a_response_that_left_the_body_unread_closes_the_connection():
    assert call(reading(0), b"x" * 1000).closes
    assert call(reading(999), b"x" * 1000).closes


def test_a_request_without_a_body_is_left_alone():
    assert not call(reading(0), b"", length="").closes
    assert not call(reading(0), b"", length="not a number").closes


def test_under_a_server_that_cannot_close_on_request_the_response_is_unchanged():
    started = []
    environ = {"CONTENT_LENGTH": "10", "wsgi.input": io.BytesIO(b"x" * 10)}
    body = closing_after_unread_body(reading(0))(environ, lambda status, headers, *exc: started.append(status))
    assert list(body) == [b"ok"] and started == ["200 OK"]
