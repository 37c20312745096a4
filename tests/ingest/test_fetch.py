"""ingest.fetch: what is fetched and what is refused, against real HTTP(S) servers on 127.0.0.1."""
import re
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ingest.fetch import Fetched, FetchRefused, check_url, fetch
from tests.ingest.trickle import Trickler, fetch_threads

PAGE = b"<html><head><title>Runbook</title></head><body><h1>Deploy</h1><p>Steps.</p></body></html>"
LOOPBACK = ["127.0.0.1"]

# A self-signed certificate for the host name "localhost" only (no IP address in it), valid until 2126.
CERTIFICATE = """-----BEGIN CERTIFICATE-----
MIIBlDCCATugAwIBAgIUJ+YUWM7hxJLGaeUMryIRSTvoNPowCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyNzEyMjgxMVoYDzIxMjYxMTAz
MTIyODExWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAARsJIAdxaNknpq2OXHkg44a/BAr5cIRQNlxD6cAtnn0xDfp6+VY5Adb
oeHowC846rxzBvex87WF3F2CZh6DT5TCo2kwZzAdBgNVHQ4EFgQU7wWDTKWFOfWJ
rYxsdKS27TX6j1IwHwYDVR0jBBgwFoAU7wWDTKWFOfWJrYxsdKS27TX6j1IwFAYD
VR0RBA0wC4IJbG9jYWxob3N0MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwID
RwAwRAIgavIb8bjW8T0e+gAYKAHAVmyusvWRjOxCoAK+eoBnM6UCIFi7dBHrzgn1
qZA7EEbUKSC1q9QmdSWcUeu8o8md9es0
-----END CERTIFICATE-----
"""
PRIVATE_KEY = """-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgnySebxHPyJvyR1Pd
BftKyxFUFCMZ7SD2R0bIS+cdw+KhRANCAARsJIAdxaNknpq2OXHkg44a/BAr5cIR
QNlxD6cAtnn0xDfp6+VY5AdboeHowC846rxzBvex87WF3F2CZh6DT5TC
-----END PRIVATE KEY-----
"""


class Handler(BaseHTTPRequestHandler):
    """HTTP/1.0: a body without Content-Length runs until the connection closes."""

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path
        try:
            if path == "/page.html":
                headers = [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(PAGE)))]
                self.reply(200, PAGE, headers)
            elif path == "/host":
                self.reply(200, self.headers["Host"].encode(), [("Content-Type", "text/plain")])
            elif path == "/chain/1":
                self.reply(302, headers=[("Location", "/chain/2")])
            elif path == "/chain/2":
                self.reply(301, headers=[("Location", "3")])  # relative to /chain/2
            elif path == "/chain/3":
                host, port = self.server.server_address
                self.reply(307, headers=[("Location", f"http://{host}:{port}/page.html")])
            elif path == "/loop":
                self.reply(302, headers=[("Location", "/loop")])
            elif path == "/big-declared":
                self.reply(200, b"x" * 50_000, [("Content-Length", "50000")])
            elif path == "/big-streamed":
                self.reply(200)
                for _ in range(16):
                    self.wfile.write(b"y" * 4096)
            elif path == "/slow":
                self.reply(200, headers=[("Content-Length", "1000")])
                for _ in range(100):
                    self.wfile.write(b"z" * 10)
                    self.wfile.flush()
                    time.sleep(0.05)
            elif path == "/missing":
                self.reply(404, b"no such page")
            elif path == "/to-metadata":
                self.reply(302, headers=[("Location", "http://169.254.169.254/latest/meta-data/")])
            elif path == "/to-bad-port":
                self.reply(302, headers=[("Location", "http://127.0.0.1:99999/page.html")])
            elif path == "/to-private":
                self.reply(302, headers=[("Location", "http://10.0.0.1/admin")])
            elif path == "/download":
                disposition = "attachment; filename*=UTF-8''na%C3%AFve%20notes.md"
                self.reply(200, b"# Notes", [("Content-Disposition", disposition)])
            elif path == "/":
                self.reply(200, b"root")
            else:
                self.reply(500)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the client stopped reading: what the size and time limits are for


def serve(server):
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return server


@pytest.fixture(scope="module")
def base():
    server = serve(ThreadingHTTPServer(("127.0.0.1", 0), Handler))
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def tls_server(tmp_path, monkeypatch):
    """An https server for "localhost", trusted through SSL_CERT_FILE; records the SNI names it was sent."""
    (tmp_path / "cert.pem").write_text(CERTIFICATE)
    (tmp_path / "key.pem").write_text(PRIVATE_KEY)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server_names = []
    context.sni_callback = lambda connection, name, ctx: server_names.append(name)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    serve(server)
    yield server.server_address[1], server_names
    server.shutdown()
    server.server_close()


def get(url, **options):
    return fetch(url, **{"max_bytes": 100_000, "timeout": 2.0, "allow": LOOPBACK, **options})


# --- Fetched ----------------------------------------------------------------------------------------------

def test_an_allowed_page_is_fetched_with_its_content_type_and_file_name(base):
    assert get(f"{base}/page.html") == Fetched(
        url=f"{base}/page.html", data=PAGE, content_type="text/html; charset=utf-8", filename="page.html")


def test_the_file_name_comes_from_content_disposition_else_the_host(base):
    assert get(f"{base}/download").filename == "naïve notes.md"
    assert get(f"{base}/").filename == "127.0.0.1"


def test_a_redirect_chain_is_followed_to_the_final_url(base):
    fetched = get(f"{base}/chain/1")
    assert (fetched.url, fetched.data, fetched.filename) == (f"{base}/page.html", PAGE, "page.html")


def test_a_redirect_chain_longer_than_the_limit_is_refused(base):
    with pytest.raises(FetchRefused, match="more than 2 redirects"):
        get(f"{base}/chain/1", max_redirects=2)


def test_an_endless_redirect_loop_is_refused(base):
    with pytest.raises(FetchRefused, match="more than 5 redirects") as raised:
        get(f"{base}/loop")
    assert raised.value.field == "url"


def test_a_non_2xx_status_is_refused_naming_it(base):
    with pytest.raises(FetchRefused, match="HTTP 404"):
        get(f"{base}/missing")


# --- Size and time ----------------------------------------------------------------------------------------

def test_a_body_declared_larger_than_the_limit_is_refused(base):
    with pytest.raises(FetchRefused, match="50000 bytes, larger than the limit of 10000 bytes"):
        get(f"{base}/big-declared", max_bytes=10_000)


def test_a_streamed_body_is_cut_off_as_soon_as_it_passes_the_limit(base):
    with pytest.raises(FetchRefused, match="larger than the limit of 10000 bytes"):
        get(f"{base}/big-streamed", max_bytes=10_000)
    assert len(get(f"{base}/big-streamed", max_bytes=65_536).data) == 65_536


def test_a_slow_body_is_refused_at_the_overall_deadline(base):
    started = time.monotonic()
    with pytest.raises(FetchRefused, match="timed out after 0.3 seconds"):
        get(f"{base}/slow", timeout=0.3)
    assert time.monotonic() - started < 0.6


def test_a_server_trickling_its_headers_is_cut_off_at_the_deadline_and_its_connection_closed():
    """A header line every 0.3 s never trips a per-read timeout: the deadline must close the connection and end the
    request's thread, not abandon them while the server goes on for 10 s."""
    before = set(fetch_threads())
    with Trickler(every=0.3, duration=10) as server:
        started = time.monotonic()
        with pytest.raises(FetchRefused, match="timed out after 1 seconds"):
            get(f"{server.url}/page.html", timeout=1.0)
        assert time.monotonic() - started < 1.5
        assert set(fetch_threads()) <= before  # finished, not left running
        assert server.closed.wait(max(started + 2.5 - time.monotonic(), 0)), "the connection is still open"
        [closed_after] = server.closed_after
        assert closed_after is not None and closed_after < 2.5


# --- Addresses --------------------------------------------------------------------------------------------

def test_loopback_is_refused_unless_allowed(base):
    with pytest.raises(FetchRefused, match="127.0.0.1 is a loopback address"):
        get(f"{base}/page.html", allow=())


@pytest.mark.parametrize("allow", [["127.0.0.0/8"], ["localhost"], ["LocalHost"], "127.0.0.1"])
def test_allow_takes_networks_and_case_insensitive_host_names(base, allow):
    port = base.rsplit(":", 1)[1]
    assert get(f"http://localhost:{port}/host", allow=allow).data == f"localhost:{port}".encode()


def test_a_host_name_that_resolves_to_loopback_is_refused_unless_allowed(base):
    port = base.rsplit(":", 1)[1]
    with pytest.raises(FetchRefused, match="localhost resolves to .*loopback"):
        get(f"http://localhost:{port}/page.html", allow=["10.0.0.0/8"])


@pytest.mark.parametrize("url, kind", [
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://10.0.0.1/", "private"),
    ("http://192.168.1.10:8080/", "private"),
    ("http://100.64.0.1/", "non-public"),
    ("http://0.0.0.0/", "unspecified"),
    ("http://224.0.0.1/", "multicast"),
    ("http://[::1]/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://[::ffff:169.254.169.254]/", "link-local"),
    ("http://[fd00::1]/", "private"),
    ("http://[fe80::1]/", "link-local"),
    ("http://2130706433/", "loopback"),  # 127.0.0.1 written as one number
])
def test_non_public_addresses_are_refused_before_connecting(url, kind):
    with pytest.raises(FetchRefused, match=f"is a {kind} address"):
        fetch(url, max_bytes=1000, timeout=2.0)


@pytest.mark.parametrize("path, address", [("/to-metadata", "169.254.169.254"), ("/to-private", "10.0.0.1")])
def test_a_redirect_from_an_allowed_server_to_a_private_address_is_refused(base, path, address):
    started = time.monotonic()
    with pytest.raises(FetchRefused, match=f"{address} is a (link-local|private) address"):
        get(f"{base}{path}")
    assert time.monotonic() - started < 0.5  # refused at the check, no connection attempt to wait for


@pytest.mark.parametrize("url", [
    "ftp://127.0.0.1/file.txt", "file:///etc/passwd", "gopher://127.0.0.1:70/", "data:text/plain,hello",
    "javascript:alert(1)", "example.com/page", "//127.0.0.1/page",
])
def test_schemes_other_than_http_and_https_are_refused(url):
    with pytest.raises(FetchRefused, match="only http and https"):
        get(url)


@pytest.mark.parametrize("port, refusal", [("0", "Invalid port: 0 (a port is 1 to 65535)"),
                                           ("65536", "Invalid port: 65536 ("), ("99999", "Invalid port: 99999 ("),
                                           ("-1", "Invalid port: -1 ("), ("8o", "Invalid port: '8o'")])
def test_a_port_outside_1_to_65535_or_an_unparseable_one_is_refused_before_connecting(port, refusal):
    for refuse in (get, lambda url: check_url(url, allow=LOOPBACK)):
        with pytest.raises(FetchRefused, match=re.escape(f"'http://127.0.0.1:{port}/page.html' is not a valid URL: "
                                                         f"{refusal}")) as raised:
            refuse(f"http://127.0.0.1:{port}/page.html")
        assert raised.value.field == "url"


def test_a_redirect_to_an_invalid_port_is_refused(base):
    with pytest.raises(FetchRefused, match=re.escape("is not a valid URL: Invalid port: 99999 (a port is 1 to 65535)")):
        get(f"{base}/to-bad-port")


@pytest.mark.parametrize("userinfo", ["user:pass@", "user@", ":pass@"])
def test_urls_with_credentials_are_refused(base, userinfo):
    with pytest.raises(FetchRefused, match="credentials"):
        get(base.replace("http://", f"http://{userinfo}") + "/page.html")


# --- https: pinned to the checked address, verified against the host name --------------------------------

def test_https_connects_to_the_checked_address_but_verifies_and_sends_the_host_name(tls_server):
    port, server_names = tls_server
    fetched = fetch(f"https://localhost:{port}/host", max_bytes=1000, timeout=2.0, allow=["localhost"])
    assert fetched.data == f"localhost:{port}".encode()  # the Host header names the host, not the IP
    assert server_names == ["localhost"]  # and so does the TLS SNI


def test_https_certificates_are_still_verified(tls_server):
    port, _ = tls_server
    with pytest.raises(FetchRefused, match="certificate"):  # the certificate is for "localhost", not the IP
        fetch(f"https://127.0.0.1:{port}/host", max_bytes=1000, timeout=2.0, allow=LOOPBACK)
