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
import httpcore
import httpx
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "KnowHub-ingest/1"
GRACE_SECONDS = 0.5  # once the deadline has passed, how long the caller waits for the aborted request's thread to end
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class FetchRefused(ValueError):
    """The URL was not fetched; the message says why (the API answers 400 naming `field`)."""

    def __init__(self, message: str, field: str = "url"):
        super().__init__(message)
        self.field = field


class _TimedOut(FetchRefused):
    """The deadline passed inside the work: the caller is told so in `_within_deadline`'s words."""


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
    return _within_deadline(lambda limit: _fetch(url, max_bytes, limit, max_redirects, hosts, networks),
                            timeout, f"fetching {url}")


def _within_deadline(work, timeout: float, what: str):
    """`work(limit)`'s result, or FetchRefused once `timeout` seconds have passed.

    The deadline holds whatever the server does. httpx's own timeouts apply per operation (a server trickling
    one byte a second never trips them), so the work's connections come from `_client(limit)`, whose every socket
    operation may take no longer than the time left. The work runs in a daemon thread the caller waits for at
    most `timeout` seconds; should it still run then, its connections are shut down (`_Limit.abort`), which
    wakes it wherever it waits on one, and the caller waits up to GRACE_SECONDS more for it to end. Only
    getaddrinfo, which has no timeout, can keep the thread (never a connection) longer.
    """
    limit = _Limit(timeout)
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["done"] = work(limit)
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="ingest-fetch", daemon=True)
    worker.start()
    try:
        worker.join(max(limit.deadline - time.monotonic(), 0))
        given_up = worker.is_alive()
        if given_up:
            limit.abort()
            worker.join(GRACE_SECONDS)
    finally:
        limit.abort()  # what the work left open (nothing, when it ended on its own)
    if given_up or isinstance(outcome.get("error"), _TimedOut):  # whatever the aborted work raised on its way out
        raise FetchRefused(_("%(what)s timed out after %(seconds)g seconds") % {"what": what, "seconds": timeout})
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["done"]


class _Limit:
    """One call's deadline, shared by the thread that waits for the work and the one that does it: how long each
    socket operation may still take, and the connections to shut down when the waiting thread gives up."""

    def __init__(self, timeout: float):
        self.deadline = time.monotonic() + timeout
        self.cancelled = threading.Event()
        self._lock = threading.Lock()
        self._watched: set[socket.socket] = set()

    def left(self, timeout: float | None, error: type[Exception]) -> float:
        """`timeout` cut to the time left; `error` (an httpcore timeout) when none is left or the call was given up."""
        left = self.deadline - time.monotonic()
        if left <= 0 or self.cancelled.is_set():
            raise error("the deadline has passed")
        return left if timeout is None else min(timeout, left)

    def watch(self, sock: socket.socket) -> socket.socket:
        """A duplicate of `sock`'s descriptor, kept to shut its connection down from the waiting thread: a shutdown
        (unlike a close) wakes a thread blocked on the socket, under TLS too, and sends the server our FIN."""
        duplicate = sock.dup()
        with self._lock:
            if not self.cancelled.is_set():
                self._watched.add(duplicate)
                return duplicate
        _shut(duplicate)
        raise httpcore.ConnectTimeout("the deadline has passed")

    def forget(self, duplicate: socket.socket) -> None:
        """The connection was closed: its duplicate is closed too (else the connection would stay open)."""
        with self._lock:  # never while `abort` shuts it down: a closed descriptor's number may be reused at once
            self._watched.discard(duplicate)
            duplicate.close()

    def abort(self) -> None:
        """Give up: every socket operation from now on fails, every connection still open is shut down."""
        with self._lock:
            self.cancelled.set()
            for duplicate in self._watched:
                _shut(duplicate)
            self._watched.clear()


def _shut(duplicate: socket.socket) -> None:
    try:
        duplicate.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected (any more)
    finally:
        duplicate.close()


class _Backend(httpcore.NetworkBackend):
    """httpcore's own sockets, each operation's timeout cut to the time left and each connection watched (`_Limit`)."""

    def __init__(self, limit: _Limit):
        self._limit = limit
        self._sockets = httpcore.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None) -> httpcore.NetworkStream:
        stream = self._sockets.connect_tcp(host, port, self._limit.left(timeout, httpcore.ConnectTimeout),
                                           local_address, socket_options)
        try:
            return _Stream(stream, self._limit, self._limit.watch(stream.get_extra_info("socket")))
        except BaseException:
            stream.close()
            raise


class _Stream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream, limit: _Limit, duplicate: socket.socket):
        self._stream, self._limit, self._duplicate = stream, limit, duplicate

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._limit.left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._limit.left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            self._limit.forget(self._duplicate)

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        # The same connection (the TLS socket keeps the descriptor): the same duplicate shuts it down.
        return _Stream(self._stream.start_tls(ssl_context, server_hostname,
                                              self._limit.left(timeout, httpcore.ConnectTimeout)),
                       self._limit, self._duplicate)

    def get_extra_info(self, info: str):
        return self._stream.get_extra_info(info)


def _client(limit: _Limit) -> httpx.Client:
    """An httpx client whose connections are held to `limit`. httpx has no option for httpcore's network backend:
    its transport's connection pool is replaced by one with ours (what `HTTPTransport` itself builds, for a
    client that sends one request at a time, through no proxy)."""
    context = _ssl_context(os.environ.get("SSL_CERT_FILE") or certifi.where())
    transport = httpx.HTTPTransport(verify=context, trust_env=False)
    if not isinstance(getattr(transport, "_pool", None), httpcore.ConnectionPool):
        raise RuntimeError("httpx's HTTPTransport no longer keeps its pool in `_pool`: see ingest.fetch._client")
    transport._pool = httpcore.ConnectionPool(ssl_context=context, network_backend=_Backend(limit))
    return httpx.Client(transport=transport, trust_env=False, follow_redirects=False)


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


def _fetch(url: str, max_bytes: int, limit: _Limit, max_redirects: int, hosts: set[str],
           networks: list[Network]) -> Fetched:
    current = _checked_url(url)
    redirects = 0
    with _client(limit) as client:
        while True:
            host = current.raw_host.decode("ascii")
            port = current.port or (443 if current.scheme == "https" else 80)
            addresses = _resolve(host, port, networks, checked=host.lower().rstrip(".") not in hosts)
            response = _send(client, current, addresses, limit.deadline)
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
                data = _read(response, current, max_bytes, limit)
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
    if parsed.port is not None and not 1 <= parsed.port <= 65535:  # httpx takes any integer
        raise FetchRefused(_("%(url)r is not a valid URL: %(error)s")
                           % {"url": str(url), "error": f"Invalid port: {parsed.port} (a port is 1 to 65535)"})
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
    raise _TimedOut(_("fetching %(url)s timed out") % {"url": url})


def _headers(url: httpx.URL, given: dict[str, str] | None) -> httpx.Headers:
    """Ours, overridden by the caller's whatever their case; the Host header always the URL's own."""
    headers = httpx.Headers({"User-Agent": USER_AGENT, "Accept": "*/*"})
    headers.update(given or {})
    headers["Host"] = url.netloc.decode("ascii")
    return headers


def _read(response: httpx.Response, url: httpx.URL, max_bytes: int, limit: _Limit) -> bytes:
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
            if limit.cancelled.is_set() or time.monotonic() > limit.deadline:
                raise _TimedOut(_("fetching %(url)s timed out") % {"url": url})
            parts.append(part)
    except httpx.TimeoutException:
        raise _TimedOut(_("fetching %(url)s timed out") % {"url": url}) from None
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

    def send(limit: _Limit) -> Posted:
        target = _checked_url(url)
        host = target.raw_host.decode("ascii")
        addresses = _resolve(host, target.port or (443 if target.scheme == "https" else 80), networks,
                             checked=host.lower().rstrip(".") not in hosts)
        with _client(limit) as client:
            response = _send(client, target, addresses, limit.deadline, method="POST", content=content,
                             headers=headers)
            try:
                body = b""
                for part in response.iter_bytes():
                    body += part
                    if len(body) >= max_response_bytes or limit.cancelled.is_set() or time.monotonic() > limit.deadline:
                        break
            except httpx.HTTPError:
                pass  # the status is the answer; a body cut short is only a shorter log line
            finally:
                response.close()
            return Posted(status_code=response.status_code, body=body[:max_response_bytes])

    return _within_deadline(send, timeout, f"posting to {url}")
