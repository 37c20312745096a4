"""A webhook receiver on loopback for the tests: records every request, checks its signature with the secret the
way a subscriber would (written from the Standard Webhooks description, not with our signing code), and answers
with the statuses it is told to."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    names: list[str]  # every header name as sent, repeats included

    @property
    def json(self) -> dict:
        return json.loads(self.body)


def signature_valid(secret: str, headers: dict[str, str], body: bytes) -> bool:
    key = base64.b64decode(secret.split("_", 1)[1])
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    given = [s.split(",", 1)[1] for s in headers["webhook-signature"].split() if s.startswith("v1,")]
    return any(hmac.compare_digest(expected, s) for s in given)


class Receiver:
    def __init__(self, statuses=(200,), answer: bytes | None = None):
        self.statuses = list(statuses)  # answered in turn; the last one repeats
        self.answer = answer  # the body of every answer; default: "answered <status>"
        self.received: list[Received] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                receiver.received.append(Received({k.lower(): v for k, v in self.headers.items()}, body,
                                                  [k.lower() for k in self.headers.keys()]))
                status = receiver.statuses.pop(0) if len(receiver.statuses) > 1 else receiver.statuses[0]
                answer = f"answered {status}".encode() if receiver.answer is None else receiver.answer
                self.send_response(status)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/knowhub"

    def __enter__(self) -> Receiver:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
