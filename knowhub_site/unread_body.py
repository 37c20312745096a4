"""Close the connection after a response that left part of the request's body unread.

A body over Django's limit (`DATA_UPLOAD_MAX_MEMORY_SIZE`) is refused without being read: 413 in the API, 400 in
the UI. gunicorn then drains at most 64 KB of what is left before it would reuse the connection, and closes it
otherwise — after its response said `Connection: keep-alive`. A keep-alive client (httpx, requests, the agent
client) sends its next request on that connection and gets no answer at all ("server disconnected"): a feedback
report after a refused save failed for a reason that had nothing to do with it. gunicorn ignores a `Connection`
header set by the application, so the response is marked for closing through gunicorn's own
`Response.force_close` (the object whose `start_response` the application is given); it then says
`Connection: close` and the client opens a new connection. Under another server this does nothing.
"""


class _Counted:
    """The request's input stream, counting the bytes the application read."""

    def __init__(self, stream):
        self._stream = stream
        self.read_bytes = 0

    def _counted(self, data):
        self.read_bytes += len(data)
        return data

    def read(self, *args):
        return self._counted(self._stream.read(*args))

    def readline(self, *args):
        return self._counted(self._stream.readline(*args))

    def readlines(self, *args):
        lines = self._stream.readlines(*args)
        self.read_bytes += sum(len(line) for line in lines)
        return lines

    def __iter__(self):
        for line in self._stream:
            yield self._counted(line)


def _declared_length(environ) -> int:
    try:
        return max(int(environ.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return 0


def force_close_of(start_response):
    """gunicorn's `Response.force_close` behind `start_response` (None under another server)."""
    return getattr(getattr(start_response, "__self__", None), "force_close", None)


def closing_after_unread_body(app):
    """The WSGI application `app`, whose responses close the connection when the request's body was not all read."""

    def application(environ, start_response):
        declared = _declared_length(environ)
        force_close = force_close_of(start_response)
        if not declared or force_close is None or "wsgi.input" not in environ:
            return app(environ, start_response)
        body = environ["wsgi.input"] = _Counted(environ["wsgi.input"])

        def start(status, headers, *exc_info):
            if body.read_bytes < declared:
                force_close()
            return start_response(status, headers, *exc_info)

        return app(environ, start)

    return application
