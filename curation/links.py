"""Which stored text may become a link: only absolute http(s) URLs.

Agents write `source.urls` (and any other text a page may link); a `javascript:` or
`data:` URL rendered as an `href` would run in a curator's browser on click. Browsers
ignore leading and trailing C0 control characters and spaces and drop tabs and newlines
anywhere in a URL (WHATWG URL parsing), so the scheme is read after doing the same.
"""
import re
from urllib.parse import urlsplit

LINKABLE_SCHEMES = frozenset({"http", "https"})
_EDGE = "".join(chr(c) for c in range(0x21))  # C0 controls and space
_TAB_OR_NEWLINE = re.compile(r"[\t\n\r]")


def http_url(value) -> str | None:
    """The URL as a browser would read it when it is absolute http(s) with a host, else None."""
    if not isinstance(value, str):
        return None
    url = _TAB_OR_NEWLINE.sub("", value.strip(_EDGE))
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced "[" in the host
        return None
    if parts.scheme.lower() not in LINKABLE_SCHEMES or not parts.hostname:
        return None
    return url
