"""The web server's own limits and errors (knowhub_site/gunicorn_conf.py), through gunicorn started as `serve` starts
it: a GET search's longest question fits in its request line, and what gunicorn refuses itself is JSON."""
import json
import os
import socket
import subprocess
import time
from contextlib import contextmanager
from urllib.parse import quote

import httpx
import pytest

from knowhub_site.gunicorn_conf import REQUEST_LINE_MAX
from knowhub_site.management.commands.serve import gunicorn_command
from tests.conftest import REPO_ROOT, wait_for
from tests.stack import free_port

QUESTION_MAX = 2_000  # knowledge.inputs: the most characters `q` may hold
READ_SECONDS = 2  # KNOWHUB_REQUEST_READ_SECONDS for this server: how long a request may take to arrive
THREADS = 2


@contextmanager
def echo_server(read_seconds: int):
    """gunicorn as `serve` starts the web server, serving tests/knowhub_site/echo_wsgi.py; its base URL."""
    port = free_port()
    command = [part if part != "knowhub_site.wsgi:application" else "tests.knowhub_site.echo_wsgi:application"
               for part in gunicorn_command("wsgi", bind=f"127.0.0.1:{port}", workers=1, threads=THREADS)]
    assert "tests.knowhub_site.echo_wsgi:application" in command
    env = {**os.environ, "KNOWHUB_REQUEST_READ_SECONDS": str(read_seconds)}
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"

    def up():
        try:
            return httpx.get(base + "/", timeout=1).status_code == 200
        except httpx.HTTPError:
            assert process.poll() is None, process.stderr.read().decode()
            return False

    try:
        wait_for(up, timeout=60, interval=0.2, message="gunicorn to answer")
        yield base
    finally:
        process.terminate()
        process.wait(30)


@pytest.fixture(scope="module")
def server():
    with echo_server(READ_SECONDS) as base:
        yield base


def send(server: str, request: bytes) -> socket.socket:
    host, port = server.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)), timeout=30)
    connection.sendall(request)
    return connection


def answer_of(connection: socket.socket) -> tuple[bytes, dict]:
    """The head and JSON body of what the server answered on `connection`, read until it closes."""
    with connection:
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head, json.loads(body)


def next_answer(connection: socket.socket) -> tuple[bytes, dict]:
    """The head and JSON body of the next response on a keep-alive `connection` (read up to its Content-Length; the
    connection stays open)."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += _received(connection)
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += _received(connection)
    return head, json.loads(body)


def _received(connection: socket.socket) -> bytes:
    chunk = connection.recv(65536)
    if not chunk:
        raise AssertionError("the server closed the connection before answering")
    return chunk


def test_the_longest_chinese_question_fits_in_a_get_searchs_request_line(server):
    for character in ("部", "😀"):  # 9 and 12 bytes once percent-encoded
        query = f"q={quote(character * QUESTION_MAX)}&top_k=5&types=tool,strategy&scopes=org:acme"
        reply = httpx.get(f"{server}/api/knowledge/search?{query}", timeout=10)
        assert reply.status_code == 200, reply.text[:300]
        assert reply.json() == {"query_length": len(query)}


def test_a_request_line_past_the_limit_is_a_414_in_the_apis_json_error_shape(server):
    head, body = answer_of(send(server, b"GET /api/knowledge/search?q=" + b"x" * REQUEST_LINE_MAX + b" HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert head.startswith(b"HTTP/1.1 414 ")
    assert b"Content-Type: application/json" in head and b"Connection: close" in head
    assert body["error"]["code"] == "uri_too_long" and body["error"]["fields"] == {}
    assert "POST /api/knowledge/search" in body["error"]["message"]


def test_a_malformed_request_is_a_400_in_the_apis_json_error_shape(server):
    head, body = answer_of(send(server, b"GET /api/knowledge HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n"))
    assert head.startswith(b"HTTP/1.1 400 ") and b"Content-Type: application/json" in head
    assert body["error"]["code"] == "bad_request"


def test_clients_stalled_mid_head_get_a_408_and_no_longer_hold_the_threads_others_need(server):
    stalled = [send(server, b"GET /api/knowledge/search?q=deploy HTTP/1.1\r\nHost: x\r\n")  # the head never ends
               for _ in range(THREADS * 2)]  # more half-sent requests than the server has threads
    time.sleep(0.5)  # each taken up by a thread, as a slow client's request is

    answered = httpx.get(f"{server}/api/knowledge", timeout=READ_SECONDS * 10)  # before the bound: never answered
    assert answered.status_code == 200

    for connection in stalled:
        head, body = answer_of(connection)
        assert head.startswith(b"HTTP/1.1 408 ") and b"Connection: close" in head
        assert body["error"]["code"] == "request_timeout" and "head" in body["error"]["message"]


def test_a_body_that_stops_coming_fails_the_applications_read_and_frees_the_thread(server):
    stalled = [send(server, b"POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"x" * 10)
               for _ in range(THREADS * 2)]
    time.sleep(0.5)

    assert httpx.get(f"{server}/", timeout=READ_SECONDS * 10).status_code == 200

    for connection in stalled:
        head, body = answer_of(connection)
        assert head.startswith(b"HTTP/1.1 408 ") and "did not arrive" in body["error"]


def test_a_body_that_arrived_whole_is_read_however_late_the_application_gets_to_it(server):
    body = b"y" * 200_000  # more than gunicorn reads with the head
    late = send(server, f"POST /body?late={READ_SECONDS + 1} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                        f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    head, answered = answer_of(late)
    assert head.startswith(b"HTTP/1.1 200 ") and answered == {"body_length": len(body)}


def test_each_request_on_a_keep_alive_connection_gets_a_deadline_of_its_own(server):
    # the first request outlasts the bound (its view reads the body late); the next, on the same connection, is
    # read against a deadline of its own, not the first one's
    with send(server, f"POST /body?late={READ_SECONDS + 1} HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc".encode()) \
            as connection:
        head, body = next_answer(connection)
        assert head.startswith(b"HTTP/1.1 200 ") and body == {"body_length": 3} and b"close" not in head.lower()
        connection.sendall(b"POST /body HTTP/1.1\r\nHost: x\r\n")
        time.sleep(0.5)  # its head comes in two parts: past the first request's deadline, within its own
        connection.sendall(b"Content-Length: 5\r\n\r\nhello")
        head, body = next_answer(connection)
        assert head.startswith(b"HTTP/1.1 200 ") and body == {"body_length": 5}


def test_no_bound_is_applied_when_the_setting_is_zero():
    with echo_server(0) as base:
        stalled = send(base, b"GET / HTTP/1.1\r\nHost: x\r\n")
        time.sleep(READ_SECONDS + 1)
        stalled.sendall(b"\r\n")  # the head ends late and is still answered
        with stalled:
            head, body = next_answer(stalled)
        assert head.startswith(b"HTTP/1.1 200 ") and body == {"query_length": 0}


def test_clients_that_keep_their_socket_after_a_connection_close_answer_do_not_hold_up_the_next_request(server):
    kept_open = [send(server, b"GET /?n=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                 for _ in range(10)]  # each closed gracefully: lingering until the client closes, 2 s at most
    time.sleep(0.5)

    # the lingering was the worker's event loop's, one connection after another: this waited ~16 s
    assert httpx.get(f"{server}/", timeout=5).status_code == 200

    for connection in kept_open:
        head, body = answer_of(connection)
        assert head.startswith(b"HTTP/1.1 200 ") and body == {"query_length": 3}


def test_an_idle_keep_alive_connection_outlives_the_agent_clients_own_idle_limit(server):
    # httpx (the agent client) keeps an idle connection 5 s: the server must not close it first, or a call sent on
    # it as the server closes it is lost, and a feedback call cannot be safely sent again
    with send(server, b"GET /?n=1 HTTP/1.1\r\nHost: x\r\n\r\n") as connection:
        head, _ = next_answer(connection)
        assert head.startswith(b"HTTP/1.1 200 ")
        time.sleep(httpx.Limits().keepalive_expiry + 1)
        connection.sendall(b"GET /?n=22 HTTP/1.1\r\nHost: x\r\n\r\n")
        head, body = next_answer(connection)
        assert head.startswith(b"HTTP/1.1 200 ") and body == {"query_length": 4}
