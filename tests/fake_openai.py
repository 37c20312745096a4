"""An OpenAI-compatible HTTP server on loopback, for the real `openai` client to call.

The only stand-in the tests use: paid outside services. Tell it what to do
next with `reply_json`, `reply_text`, `fail(status)` or `stall(seconds)`;
it records every request body it receives.
"""
import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI:
    def __init__(self):
        self.requests: list[dict] = []
        self._script: deque = deque()
        self.default = ("text", "{}")
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                fake.requests.append({"path": self.path, "body": body})
                kind, value = fake._script.popleft() if fake._script else fake.default
                if kind == "stall":
                    time.sleep(value)
                    kind, value = "text", "{}"
                if kind == "status":
                    self._send(value, {"error": {"message": f"fake error {value}", "type": "server_error"}})
                    return
                if self.path.endswith("/embeddings"):
                    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    data = [{"object": "embedding", "index": i, "embedding": [1.0, float(len(t) % 7), 0.5]} for i, t in enumerate(inputs)]
                    self._send(200, {"object": "list", "data": data, "model": body.get("model"), "usage": {"prompt_tokens": 1, "total_tokens": 1}})
                    return
                content = json.dumps(value) if kind == "json" else value
                self._send(200, {
                    "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                })

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False  # a stalled request must not hold up shutdown
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def reply_json(self, value): self._script.append(("json", value))
    def reply_text(self, value: str): self._script.append(("text", value))
    def fail(self, status: int): self._script.append(("status", status))
    def stall(self, seconds: float): self._script.append(("stall", seconds))

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
