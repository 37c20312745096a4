"""Fetching a document by URL without letting the URL reach into our own network (SSRF).

Owns the rules for URL ingestion: http and https only, no credentials in the URL; every address the host
resolves to must be public unless the host, the address or its network is allow-listed; the connection
goes to the very address that was checked; redirects are followed by hand and checked again at every hop;
the body is capped in bytes and the whole fetch (DNS, connect, TLS, redirects, body) has one deadline.
Every refusal is a FetchRefused whose message says why.
"""
from __future__ import annotations

import email.message
import ipaddress
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import certifi
import httpx
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "KnowHub-ingest/1"
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class FetchRefused(ValueError):
    """The URL was not fetched; the message says why (the API answers 400 naming `field`)."""

    def __init__(self, message: str, field: str = "url"):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Fetched:
    url: str  # the final URL, after redirects
    data: bytes
    content_type: str | None
    filename: str  # from Content-Disposition, else the final URL's last path segment, else its host


def fetch(url: str, *, max_bytes: int, timeout: float, max_redirects: int = 5, allow: Iterable[str] = ()) -> Fetched:
    """GET `url` under the rules above; FetchRefused when any of them says no.

    `allow` holds host names (exact, case-insensitive), IP addresses and CIDR networks that may be
    fetched although not public (e.g. ["127.0.0.1"] in tests, or an intranet wiki's host).
    """
    if max_bytes <= 0 or timeout <= 0 or max_redirects < 0:
        raise ValueError("max_bytes and timeout must be positive and max_redirects at least 0")
    hosts, networks = _parse_allow([allow] if isinstance(allow, str) else list(allow))
    return _within_deadline(
        lambda deadline, cancelled: _fetch(url, max_bytes, deadline, max_redirects, hosts, networks, cancelled),
        timeout, f"fetching {url}")


def _within_deadline(work, timeout: float, what: str):
    """`work(deadline, cancelled)`'s result, or FetchRefused once `timeout` seconds have passed.

    The deadline holds whatever the server does: the work runs in a daemon thread the caller waits for
    at most `timeout` seconds. httpx's own timeouts apply per operation (a server trickling one byte a
    second never trips them) and getaddrinfo has none; the thread, abandoned at the deadline, stops at its
    next chunk (`cancelled`) or when its own per-operation timeout, set to the time that was left, expires.
    """
    cancelled = threading.Event()
    outcome: dict[str, object] = {}
    deadline = time.monotonic() + timeout

    def run() -> None:
        try:
            outcome["done"] = work(deadline, cancelled)
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="ingest-fetch", daemon=True)
    worker.start()
    worker.join(max(deadline - time.monotonic(), 0))
    if worker.is_alive():
        cancelled.set()
        raise FetchRefused(_("%(what)s timed out after %(seconds)g seconds") % {"what": what, "seconds": timeout})
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["done"]


def _parse_allow(entries: list[str]) -> tuple[set[str], list[Network]]:
    hosts: set[str] = set()
    networks: list[Network] = []
    for entry in entries:
        entry = entry.strip()
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            hosts.add(entry.lower().rstrip("."))
    return hosts, networks


def _fetch(url: str, max_bytes: int, deadline: float, max_redirects: int, hosts: set[str],
           networks: list[Network], cancelled: threading.Event) -> Fetched:
    current = _checked_url(url)
    redirects = 0
    with httpx.Client(verify=_ssl_context(os.environ.get("SSL_CERT_FILE") or certifi.where()),
                      trust_env=False, follow_redirects=False) as client:
        while True:
            host = current.raw_host.decode("ascii")
            port = current.port or (443 if current.scheme == "https" else 80)
            addresses = _resolve(host, port, networks, checked=host.lower().rstrip(".") not in hosts)
            response = _send(client, current, addresses, deadline)
            try:
                location = response.headers.get("location")
                if response.status_code in REDIRECT_STATUSES and location:
                    redirects += 1
                    if redirects > max_redirects:
                        raise FetchRefused(_("fetching %(url)s took more than %(count)s redirects") % {"url": url, "count": max_redirects})
                    try:
                        current = _checked_url(current.join(location.strip()))
                    except httpx.InvalidURL as exc:
                        raise FetchRefused(_("%(url)s redirects to an invalid URL %(location)r: %(error)s")
                                           % {"url": current, "location": location, "error": exc}) from None
                    continue
                if not 200 <= response.status_code < 300:
                    status = f"{response.status_code} {response.reason_phrase}".rstrip()
                    raise FetchRefused(_("%(url)s answered HTTP %(status)s") % {"url": current, "status": status})
                data = _read(response, current, max_bytes, deadline, cancelled)
                return Fetched(url=str(current), data=data, content_type=response.headers.get("content-type"),
                               filename=_filename(response.headers.get("content-disposition"), current))
            finally:
                response.close()


def _checked_url(url: str | httpx.URL) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise FetchRefused(_("%(url)r is not a valid URL: %(error)s") % {"url": url, "error": exc}) from None
    if parsed.scheme not in ("http", "https"):
        shown = _("the %(scheme)s: scheme") % {"scheme": parsed.scheme} if parsed.scheme else _("a URL without a scheme")
        raise FetchRefused(_("only http and https URLs can be fetched, not %(shown)s (%(url)s)") % {"shown": shown, "url": url})
    if parsed.userinfo:
        raise FetchRefused(_("a URL with credentials (user:password@) cannot be fetched"))
    if not parsed.raw_host:
        raise FetchRefused(_("%(url)s has no host") % {"url": url})
    return parsed


@lru_cache(maxsize=4)
def _ssl_context(cafile: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=cafile)


def _resolve(host: str, port: int, networks: list[Network], *, checked: bool) -> list[Address]:
    """The addresses `host` resolves to, in resolver order; FetchRefused if any is not public and not allowed
    (one private address among public ones is enough: which one the connection would use is not ours to say)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise FetchRefused(_("cannot resolve host %(host)s: %(error)s") % {"host": host, "error": exc}) from None
    addresses: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise FetchRefused(_("cannot resolve host %(host)s") % {"host": host})
    for address in addresses if checked else ():
        if any(candidate in network for candidate in _embedded(address) for network in networks
               if candidate.version == network.version):
            continue
        reason = _non_public(address)
        if reason:
            text = (_("%(host)s is a %(kind)s address: only public addresses can be fetched") if _is_ip(host) else
                    _("%(host)s resolves to %(address)s, which is a %(kind)s address: only public addresses can be fetched"))
            raise FetchRefused(text % {"host": host, "address": address, "kind": _(reason)})
    return addresses


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _embedded(address: Address) -> list[Address]:
    """The address and any IPv4 address inside it (IPv4-mapped, 6to4, Teredo, NAT64)."""
    found: list[Address] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped:
            found.append(address.ipv4_mapped)
        if address.sixtofour:
            found.append(address.sixtofour)
        if address.teredo:
            found.extend(address.teredo)
        if address in _NAT64:
            found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


# The kinds _non_public names, marked for translation (the message shows them in the caller's language).
ADDRESS_KINDS = (gettext_noop("unspecified"), gettext_noop("loopback"), gettext_noop("link-local"),
                 gettext_noop("multicast"), gettext_noop("private"), gettext_noop("reserved"), gettext_noop("non-public"))


def _non_public(address: Address) -> str | None:
    for candidate in reversed(_embedded(address)):
        for attribute, kind in (("is_unspecified", "unspecified"), ("is_loopback", "loopback"),
                                ("is_link_local", "link-local"), ("is_multicast", "multicast"),
                                ("is_private", "private"), ("is_reserved", "reserved")):
            if getattr(candidate, attribute):
                return kind
        if not candidate.is_global:
            return "non-public"
    return None


def _send(client: httpx.Client, url: httpx.URL, addresses: list[Address], deadline: float, *, method: str = "GET",
          content: bytes | None = None, headers: dict[str, str] | None = None) -> httpx.Response:
    """Send the request (a GET unless `method` says otherwise) to the checked addresses, in order, until one accepts
    the connection.

    Pinning: the request URL names the checked IP address, so no second DNS lookup (which a rebinding DNS
    server could answer differently) ever happens; the Host header keeps the original host[:port], and for
    https the `sni_hostname` request extension (honoured by httpcore) makes the TLS handshake send that name
    as SNI and verify the server's certificate against it, not against the IP.
    """
    host = url.raw_host.decode("ascii")
    last_error: Exception | None = None
    for address in addresses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        pinned = url.copy_with(host=str(address))
        request = httpx.Request(
            method, pinned, content=content,
            headers=_headers(url, headers),
            extensions={"timeout": httpx.Timeout(remaining).as_dict(),
                        **({"sni_hostname": host} if url.scheme == "https" else {})},
        )
        try:
            return client.send(request, stream=True)
        except httpx.ConnectError as exc:  # refused or unreachable: try the next address
            last_error = exc
        except httpx.TimeoutException:
            break
        except httpx.HTTPError as exc:
            raise FetchRefused(_("fetching %(url)s failed: %(error)s") % {"url": url, "error": exc or type(exc).__name__}) from None
    if last_error is not None and deadline > time.monotonic():
        raise FetchRefused(_("cannot connect to %(host)s: %(error)s") % {"host": url.netloc.decode("ascii"), "error": last_error})
    raise FetchRefused(_("fetching %(url)s timed out") % {"url": url})


def _headers(url: httpx.URL, given: dict[str, str] | None) -> httpx.Headers:
    """Ours, overridden by the caller's whatever their case; the Host header always the URL's own."""
    headers = httpx.Headers({"User-Agent": USER_AGENT, "Accept": "*/*"})
    headers.update(given or {})
    headers["Host"] = url.netloc.decode("ascii")
    return headers


def _read(response: httpx.Response, url: httpx.URL, max_bytes: int, deadline: float,
          cancelled: threading.Event) -> bytes:
    declared = response.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > max_bytes:
        raise FetchRefused(_("%(url)s is %(size)s bytes, larger than the limit of %(limit)s bytes")
                           % {"url": url, "size": int(declared), "limit": max_bytes})
    parts, total = [], 0
    try:
        for part in response.iter_bytes():  # decoded, so a small gzip bomb is stopped by its size too
            total += len(part)
            if total > max_bytes:
                raise FetchRefused(_("%(url)s is larger than the limit of %(limit)s bytes") % {"url": url, "limit": max_bytes})
            if cancelled.is_set() or time.monotonic() > deadline:
                raise FetchRefused(_("fetching %(url)s timed out") % {"url": url})
            parts.append(part)
    except httpx.TimeoutException:
        raise FetchRefused(_("fetching %(url)s timed out") % {"url": url}) from None
    except httpx.HTTPError as exc:
        raise FetchRefused(_("reading %(url)s failed: %(error)s") % {"url": url, "error": exc or type(exc).__name__}) from None
    return b"".join(parts)


def _filename(disposition: str | None, url: httpx.URL) -> str:
    name = ""
    if disposition:
        message = email.message.Message()
        message["content-disposition"] = disposition
        name = message.get_filename() or ""
    if not name:
        name = url.path.rstrip("/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name.replace("\\", "/").rsplit("/", 1)[-1] if ch.isprintable()).strip()
    return name if name.strip(".") else url.host


def check_url(url: str, *, allow: Iterable[str] = ()) -> str:
    """Refuse at once (FetchRefused) what `fetch` would refuse before connecting: the scheme, credentials in the
    URL, an unresolvable host or a non-public address not in `allow`. The fetch checks again at every hop."""
    hosts, networks = _parse_allow([allow] if isinstance(allow, str) else list(allow))
    parsed = _checked_url(url)
    host = parsed.raw_host.decode("ascii")
    _resolve(host, parsed.port or (443 if parsed.scheme == "https" else 80), networks,
             checked=host.lower().rstrip(".") not in hosts)
    return str(parsed)


@dataclass(frozen=True)
class Posted:
    status_code: int
    body: bytes  # at most `max_response_bytes` of the response body


def post(url: str, *, content: bytes, headers: dict[str, str], timeout: float, allow: Iterable[str] = (),
         max_response_bytes: int = 4096) -> Posted:
    """POST `content` to `url` under `fetch`'s rules (scheme, no credentials, public or allowed addresses, the
    checked address pinned, one deadline); redirects are not followed (a webhook receiver answers, it does not
    send us elsewhere). Any answer is returned, whatever its status, with the start of its body; FetchRefused
    when the URL is refused or no answer came."""
    if timeout <= 0 or max_response_bytes < 0:
        raise ValueError("timeout must be positive and max_response_bytes at least 0")
    hosts, networks = _parse_allow([allow] if isinstance(allow, str) else list(allow))

    def send(deadline: float, cancelled: threading.Event) -> Posted:
        target = _checked_url(url)
        host = target.raw_host.decode("ascii")
        addresses = _resolve(host, target.port or (443 if target.scheme == "https" else 80), networks,
                             checked=host.lower().rstrip(".") not in hosts)
        with httpx.Client(verify=_ssl_context(os.environ.get("SSL_CERT_FILE") or certifi.where()),
                          trust_env=False, follow_redirects=False) as client:
            response = _send(client, target, addresses, deadline, method="POST", content=content, headers=headers)
            try:
                body = b""
                for part in response.iter_bytes():
                    body += part
                    if len(body) >= max_response_bytes or cancelled.is_set() or time.monotonic() > deadline:
                        break
            except httpx.HTTPError:
                pass  # the status is the answer; a body cut short is only a shorter log line
            finally:
                response.close()
            return Posted(status_code=response.status_code, body=body[:max_response_bytes])

    return _within_deadline(send, timeout, f"posting to {url}")
