"""Pages refuse a NUL character anywhere in their request, and a form they cannot read: 400, before any view reads it.

PostgreSQL's text cannot hold NUL (psycopg raises DataError), and a page passes what it is given to the database in
many places: a path's id (`/knowledge/%00/`), a query parameter read outside a form (`?status=`, `?page=`), a form
field. Django's form fields refuse NUL themselves, but not the rest. The API is not this middleware's: a JSON body is
checked by its parser (core/parsers.py) and every operation's input, query parameters included, by the filter chain's
`validate_input` (400 naming the field), and an API path with NUL finds no route (404). A session cookie holding NUL
(any request, the API's included: a session may call it) is dropped for a new session instead of being looked up.

A query string whose percent-encoded bytes are not UTF-8 (`?q=%FF%FE`) is refused on every request, the API's
included: Django reads such bytes as U+FFFD, and the request went on with a value its client never sent (a search
for it, an export naming the scope `org:\ufffd`). The API answers in its JSON error shape, naming the parameter.
"""
from urllib.parse import unquote, unquote_to_bytes

from django.conf import settings
from django.core.exceptions import BadRequest
from django.http.multipartparser import MultiPartParserError
from django.views.defaults import bad_request

from core.errors import error_json

NUL = "\x00"


def _unreadable_form(request) -> Exception | None:
    """Why a page's posted form cannot be read (a urlencoded form in a charset other than UTF-8, a broken multipart
    body), None when it can or there is none. Read here, before CSRF's check: Django raises BadRequest from the
    check, and its own 400 and 500 views read the form again and raised again, out of Django (gunicorn's bare 500).
    After a failure the form reads as empty (Django's own mark for a body it could not parse)."""
    if request.path_info.startswith("/api/") or request.method in ("GET", "HEAD", "OPTIONS", "TRACE"):
        return None
    try:
        request.POST  # noqa: B018 - parsed now, kept on the request for the view
    except (BadRequest, MultiPartParserError, UnicodeDecodeError) as exc:
        request._mark_post_parse_error()
        return exc
    return None


def undecodable_parameter(query_string: str) -> str | None:
    """The name of the first parameter of `query_string` (as WSGI gives it: its bytes as Latin-1) whose name or value,
    percent-decoded, is not UTF-8 (the name shown with U+FFFD where it is not); None when every one is."""
    if "%" not in query_string and query_string.isascii():  # most requests: nothing encoded, nothing to decode
        return None
    raw = query_string.encode("iso-8859-1", errors="replace")
    for pair in raw.split(b"&"):
        name, _, value = pair.partition(b"=")
        for part in (name, value):
            try:
                unquote_to_bytes(part.replace(b"+", b" ")).decode("utf-8")
            except UnicodeDecodeError:
                return unquote(name.replace(b"+", b" ").decode("iso-8859-1"), errors="replace")
    return None


def _not_utf8(request, name: str):
    reason = "not UTF-8 text (a percent-encoded byte sequence in the query string that UTF-8 cannot decode)"
    if request.path_info.startswith("/api/"):
        return error_json(400, "invalid", f"{name}: {reason}", {name: [reason]})
    return bad_request(request, ValueError(f"{name}: {reason}"))


def _holds_nul(values) -> bool:
    return any(NUL in key or any(NUL in value for value in items) for key, items in values.lists())


class RefuseNulMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if NUL in request.COOKIES.get(settings.SESSION_COOKIE_NAME, ""):  # Django's cookie parser decodes `\000`
            request.session = request.session.__class__()  # a new session: the key is never looked up (no 500)
        if (name := undecodable_parameter(request.META.get("QUERY_STRING", ""))) is not None:
            return _not_utf8(request, name)
        if unreadable := _unreadable_form(request):
            return bad_request(request, unreadable)
        return self.get_response(request)

    def process_view(self, request, view, args, kwargs):
        """After CSRF's check (a POST's form is parsed by then, or here); files are not looked into."""
        if request.path_info.startswith("/api/"):
            return None
        holds = NUL in request.path_info or _holds_nul(request.GET)
        if not holds and request.method == "POST" and request.content_type in (
                "application/x-www-form-urlencoded", "multipart/form-data"):
            holds = _holds_nul(request.POST)
        if holds:
            return bad_request(request, ValueError("a NUL character in the request"))
        return None
