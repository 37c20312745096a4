"""An OpenAI-compatible HTTP server on loopback, for the real `openai` client to call.

The only stand-in the tests use: paid outside services. Tell it what to do
next with `reply_json`, `reply_text`, `reply_tool_calls`, `fail(status)`, `stall(seconds)`,
`slow_json(seconds, value)` (a good reply, late), `reply_garbage(body)` (HTTP 200 whose
body is not JSON) or `drop()` (the connection closes without a reply);
chat completions and the Responses API (POST /responses) are both answered;
it records every request body it receives, with its arrival time (`at`, time.monotonic()).
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
        # replies by the requested JSON schema's name, e.g. {"knowledge_relation": {...}}: before the script
        self.by_schema: dict[str, object] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                fake.requests.append({"path": self.path, "body": body, "at": time.monotonic()})
                schema_name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
                if schema_name in fake.by_schema:
                    kind, value = "json", fake.by_schema[schema_name]
                else:
                    kind, value = fake._script.popleft() if fake._script else fake.default
                if kind == "stall":
                    time.sleep(value)
                    kind, value = "text", "{}"
                if kind == "slow_json":
                    time.sleep(value[0])
                    kind, value = "json", value[1]
                if kind == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if kind == "garbage":
                    data = value.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if kind == "status":
                    self._send(value, {"error": {"message": f"fake error {value}", "type": "server_error"}})
                    return
                if self.path.endswith("/embeddings"):
                    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    data = [{"object": "embedding", "index": i, "embedding": [1.0, float(len(t) % 7), 0.5]} for i, t in enumerate(inputs)]
                    self._send(200, {"object": "list", "data": data, "model": body.get("model"), "usage": {"prompt_tokens": 1, "total_tokens": 1}})
                    return
                if self.path.endswith("/responses"):
                    self._send(200, fake._responses_reply(kind, value, body))
                    return
                if kind == "tool_calls":
                    calls = [{"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                             for i, (name, args) in enumerate(value)]
                    choice = {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": calls}}
                else:
                    content = json.dumps(value) if kind == "json" else value
                    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                self._send(200, {
                    "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": body.get("model", "fake"),
                    "choices": [choice],
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
    def reply_tool_calls(self, calls: list[tuple[str, dict]]): self._script.append(("tool_calls", calls))
    def slow_json(self, seconds: float, value): self._script.append(("slow_json", (seconds, value)))
    def reply_garbage(self, body: str = "<html>502 Bad Gateway</html>"): self._script.append(("garbage", body))
    def drop(self): self._script.append(("drop", None))

    @staticmethod
    def _responses_reply(kind, value, body) -> dict:
        """The Responses API shape (POST /responses) of a scripted reply."""
        if kind == "tool_calls":
            output = [{"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": name,
                       "arguments": json.dumps(args), "status": "completed"} for i, (name, args) in enumerate(value)]
        else:
            text = json.dumps(value) if kind == "json" else value
            output = [{"type": "message", "id": "msg_0", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]}]
        return {"id": "resp_fake", "object": "response", "created_at": int(time.time()), "model": body.get("model", "fake"),
                "status": "completed", "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                          "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
