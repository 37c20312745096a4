"""An export's JSON Lines as they arrive: each line bounded, written to `output` or parsed into records."""
from __future__ import annotations

import json
from typing import Any

import httpx

from knowhub_client import _calls
from knowhub_client._transport import Deadline, shown_url
from knowhub_client.errors import KnowHubError


class Export:
    """The lines of an export reply, fed chunk by chunk. A line longer than `limit` bytes is refused rather than
    held (the server writes one record a line), and so are records collected in memory past `limit` in all (give
    `output` to keep a larger export); the deadline is checked between chunks. An HTML page (a login or proxy
    page answering 200) is refused before anything is written."""

    def __init__(self, response: httpx.Response, output: Any, limit: int, deadline: Deadline):
        kind = response.headers.get("content-type", "")
        self.url = shown_url(response.request.url)
        if "html" in kind.lower():
            raise KnowHubError(f"expected JSON Lines from {self.url}, got {kind}", status=response.status_code)
        self.request, self.limit, self.deadline = response.request, limit, deadline
        self.pending, self.scanned, self.held, self.count = bytearray(), 0, 0, 0
        self.records: list[Any] = []
        self.sink = _calls.export_sink(output)

    def __enter__(self) -> Export:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.sink is not None:
            self.sink[1]()

    def add(self, chunk: bytes) -> None:
        self.pending += chunk
        start, end = 0, self.pending.find(b"\n", self.scanned)
        while end >= 0:
            self._line(bytes(self.pending[start:end]))
            start, end = end + 1, self.pending.find(b"\n", end + 1)
        del self.pending[:start]
        self.scanned = len(self.pending)  # a long line is searched for its end once, not once a chunk
        if len(self.pending) > self.limit:
            raise KnowHubError(f"line {self.count + 1} of the export from {self.url} is over {self.limit} bytes "
                               "(max_response_bytes)", code="response_too_large")
        left = self.deadline.left()
        if left is not None and left <= 0:
            raise httpx.ReadTimeout(f"no complete export within the {self.deadline.seconds:g} s deadline",
                                    request=self.request)

    def finish(self) -> None:
        """The last line, when the export does not end with a line break."""
        self._line(bytes(self.pending))
        self.pending.clear()

    def _line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        self.count += 1
        try:
            line = raw.rstrip(b"\r").decode("utf-8")
        except UnicodeDecodeError as exc:
            raise KnowHubError(f"line {self.count} of the export from {self.url} is not UTF-8: {exc}") from None
        if self.sink is not None:
            self.sink[0](line + "\n")
            return
        self.held += len(raw)
        if self.held > self.limit:
            raise KnowHubError(f"the export from {self.url} is over {self.limit} bytes (max_response_bytes); "
                               "give `output` to write it to a file", code="response_too_large")
        try:
            self.records.append(json.loads(line))
        except (ValueError, RecursionError) as exc:
            raise KnowHubError(f"line {self.count} of the export from {self.url} is not JSON: {exc}") from exc

    def result(self) -> Any:
        return self.records if self.sink is None else {"records": self.count}
