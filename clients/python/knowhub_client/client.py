"""`KnowHub` (sync) and `AsyncKnowHub`: the agent tools of seed 003 as methods.

>>> from knowhub_client import KnowHub, EQ
>>> hub = KnowHub("http://localhost:8000", token="kh_...")
>>> saved = hub.knowledge_save(task="Log in to staging", content="Use the test account", types=["tool"])
>>> hub.knowledge_search("staging login", top_k=3, filters=EQ("types", "tool"))["results"][0]["id"]
'knowledge-20260305-a1b2'
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

import httpx

from knowhub_client import _calls
from knowhub_client._deadline import bounded_by, deadline_transport, within
from knowhub_client._export import Export
from knowhub_client._transport import (
    MAX_RESPONSE_BYTES, Body, Call, Deadline, RetryPolicy, check_sendable, clean_params, connection_failed,
    headers_for, result_of, retry_after_error, retry_after_response, wire_headers,
)
from knowhub_client.agent_text import build_context_text, goal_knowledge_text
from knowhub_client.errors import ConnectionFailed, JobFailed, JobTimeout, KnowHubError

USER_AGENT = "knowhub-client/0.1"
DEFAULT_TIMEOUT = 30.0
DEFAULT_DEADLINE = 120.0
MIN_POLL_SECONDS = 1.0  # a job poll gets what is left of wait_for_job's timeout, but at least this
IMPORT_WAIT_SECONDS = 3600.0  # knowledge_import's wait for its job: a 50 MB import takes minutes on the server

ClientDeadline = float | None | Literal["client"]  # an export's bound: seconds, None (none), or the client's

Json = dict[str, Any]


class _Base:
    max_response_bytes: int = MAX_RESPONSE_BYTES  # a longer reply is refused (KnowHubError "response_too_large")

    def __init__(self, base_url: str, token: str | None, *, timeout: float, deadline: float | None,
                 retry: RetryPolicy | None):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.deadline = deadline
        self.retry = retry or RetryPolicy()

    def _client_kwargs(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "headers": headers_for(self.token, USER_AGENT), "timeout": self.timeout}

    def _deadline(self, seconds: ClientDeadline) -> Deadline:
        return Deadline(self.deadline if seconds == "client" else seconds)

    def _poll_deadline(self, end: float) -> Deadline:
        """One poll of `wait_for_job`: within the client's deadline and what is left of the wait."""
        left = max(end - time.monotonic(), MIN_POLL_SECONDS)
        return Deadline(left if self.deadline is None else min(self.deadline, left))


class KnowHub(_Base):
    """A synchronous KnowHub client. Thread-safe; use as a context manager or call `close()`.

    Args:
        base_url: where the server runs, e.g. ``http://localhost:8000``.
        token: the agent's Bearer token (``manage.py create_agent_token``).
        timeout: seconds for one HTTP attempt (to connect, and between bytes sent or received).
        deadline: seconds one call may take in all, its attempts and the waits between them included
            (default 120; None for no bound). No retry starts, and no wait ends, after it, however slowly
            the server sends its headers or body: a reply still arriving then is abandoned
            (`ConnectionFailed`). Exports too, unless `knowledge_export` is given a ``deadline`` of its own.
        retry: how often and how long to back off on 429 / 5xx / connection errors.

    A reply longer than ``max_response_bytes`` (64 MiB; an attribute) is refused, not buffered. A token or
    argument HTTP or JSON cannot carry (a line break in the token, NaN) is refused with `InvalidArgument`.
    """

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 deadline: float | None = DEFAULT_DEADLINE, retry: RetryPolicy | None = None,
                 transport: httpx.BaseTransport | None = None):
        super().__init__(base_url, token, timeout=timeout, deadline=deadline, retry=retry)
        self._http = httpx.Client(transport=deadline_transport(transport), **self._client_kwargs())

    def __enter__(self) -> KnowHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, deadline: Deadline, **kwargs: Any) -> tuple[httpx.Response, bytes]:
        """One attempt: the reply and its body, read within `max_response_bytes` and the deadline."""
        request = self._http.build_request(method, path, timeout=deadline.timeout(self.timeout), **kwargs)
        with bounded_by(deadline):
            response = self._http.send(request, stream=True)
            try:
                body = Body(response, self.max_response_bytes, deadline)
                for chunk in response.iter_bytes():
                    body.add(chunk)
            finally:
                response.close()
        return response, bytes(body.data)

    def _request(self, call: Call, deadline: Deadline | None = None) -> Json:
        check_sendable(call)
        deadline, attempt = deadline or Deadline(self.deadline), 0
        while True:
            try:
                response, content = self._send(call.method, call.path, deadline, params=clean_params(call.params),
                                               json=call.json, headers=wire_headers(call.headers))
            except httpx.TransportError as exc:
                delay = retry_after_error(call, exc, attempt, self.retry)
                if delay is None or not deadline.allows(delay):
                    raise connection_failed(call, exc, self.base_url)
            else:
                delay = retry_after_response(call, response, attempt, self.retry, content)
                if delay is None or not deadline.allows(delay):
                    return result_of(response, content)  # every endpoint answers an object
            time.sleep(delay)
            attempt += 1

    def knowledge_search(self, query: str, top_k: int = 5, min_score: int = 3, types: list[str] | None = None, *,
                         filters: Any = None, scopes: list[str] | None = None, rank: str | None = None,
                         explain: bool = False, answer_floor: float | None = None,
                         relevance_floor: float | None = None, relevance_ratio: float | None = None,
                         include_superseded: bool = False) -> Json:
        """Search (seed: GET /api/knowledge/search). Returns ``{"results": [...], "count": n, "search_id": ...}``;
        send ``search_id`` back with feedback on these results (`knowledge_update`, `knowledge_batch_update`).
        Each result carries its ``relevance`` (0-1); an empty list means nothing here answers the query. The
        relevance gate's thresholds (``answer_floor``, ``relevance_floor``, ``relevance_ratio``) default to the
        server's.

        >>> hub.knowledge_search("selenium login", top_k=3, types=["tool"],
        ...                      filters=EQ("tags.domain", "web") & ~IN("types", ["plan"]))
        """
        return self._request(_calls.knowledge_search(query, top_k, min_score, types, filters, scopes, rank, explain,
                                                     answer_floor=answer_floor, relevance_floor=relevance_floor,
                                                     relevance_ratio=relevance_ratio,
                                                     include_superseded=include_superseded))

    def knowledge_save(self, task: str, content: str, types: list[str], tags: dict[str, str] | None = None,
                       scopes: list[str] | None = None, owner: str | None = None, source_name: str = "",
                       source_category: str = "exp", urls: list[str] | None = None, agent_id: str | None = None,
                       submitted_by: str = "", score: int = 3, message_id: str = "", *,
                       resource_ids: list[str] | None = None, idempotency_key: str | None = None,
                       secure_resource_id: str | None = None, confidence: float | None = None) -> Json:
        """Save a new item (POST /api/knowledge) → the stored item.

        ``scopes``, ``owner`` and ``agent_id`` default to the token's (first writable scope,
        ``agent:<id>``). Every save carries an Idempotency-Key (a fresh one unless given), so a
        retry after a lost reply never stores a second item. ``confidence`` (0-1) is the seed's
        ``eval.confidence``; ``secure_resource_id`` names the credential or cookie resource it relies on.

        >>> hub.knowledge_save("Log in to site A", "Use the test account; 100 logins a day",
        ...                    types=["tool", "usecase"], tags={"domain": "web"},
        ...                    resource_ids=["credentials/website_a"])["id"]
        """
        return self._request(_calls.knowledge_save(
            task=task, content=content, types=types, tags=tags, scopes=scopes, owner=owner, source_name=source_name,
            source_category=source_category, urls=urls, agent_id=agent_id, submitted_by=submitted_by, score=score,
            message_id=message_id, resource_ids=resource_ids, idempotency_key=idempotency_key,
            secure_resource_id=secure_resource_id, confidence=confidence))

    def knowledge_get(self, knowledge_id: str) -> Json:
        """One item in the seed's shape (GET /api/knowledge/{id}).

        >>> hub.knowledge_get("knowledge-20260305-a1b2")["eval"]["helpful"]
        """
        return self._request(_calls.knowledge_get(knowledge_id))

    def knowledge_update(self, knowledge_id: str, add_helpful_case: dict[str, Any] | None = None,
                         add_harmful_case: dict[str, Any] | None = None, update_score: int | None = None,
                         evolve_feedback: str | None = None, *, search_id: str | None = None,
                         idempotency_key: str | None = None) -> Json:
        """Feedback on an item (PUT /api/knowledge/{id}). With ``evolve_feedback`` the reply has a ``job``.

        Carries an Idempotency-Key (a fresh one unless given) like ``knowledge_save``, so a retry after a lost
        reply counts the case once and asks for one rewrite.

        The reply is the item with its counters after the report, but only the newest 20 cases of each history
        (``eval.histories_truncated`` says whether older ones were left out; ``knowledge_get`` has them all).

        ``search_id``: the ``search_id`` of the search that returned the item, so the server can score
        its ranking on your agents' searches (``manage.py ranking_eval``).

        >>> found = hub.knowledge_search("site A login")
        >>> hub.knowledge_update(found["results"][0]["id"], add_helpful_case={"outcome": "成功"},
        ...                      search_id=found["search_id"])
        >>> hub.knowledge_update(kid, add_helpful_case={"task": "login", "outcome": "成功"})
        >>> job = hub.knowledge_update(kid, evolve_feedback="mention the rate limit")["job"]
        >>> hub.wait_for_job(job, timeout=120)["status"]
        'succeeded'
        """
        return self._request(_calls.knowledge_update(knowledge_id, add_helpful_case, add_harmful_case, update_score,
                                                     evolve_feedback, search_id, idempotency_key))

    def knowledge_edit(self, knowledge_id: str, *, task: str | None = None, content: str | None = None,
                       tags: dict[str, str] | None = None, types: list[str] | None = None, reason: str = "",
                       base_updated_at: str | None = None) -> Json:
        """Edit an item you own (PATCH /api/knowledge/{id}); the old text is kept as a version and the
        item is re-embedded. Give at least one of task, content, tags, types. With ``base_updated_at`` (the
        ``updated_at`` of the item as you read it) an item changed since is refused (409) instead of overwritten.

        >>> hub.knowledge_edit(kid, content="Use the QA account", reason="the test account was retired")["content"]
        'Use the QA account'
        """
        return self._request(_calls.knowledge_edit(knowledge_id, task, content, tags, types, reason, base_updated_at))

    def knowledge_batch_update(self, feedback_list: list[dict[str, Any]], *, search_id: str | None = None,
                               idempotency_key: str | None = None) -> Json:
        """Many helpful/harmful reports at once; per-entry ``ok`` or ``error``.

        Each entry may carry its own ``search_id``; the ``search_id`` argument fills entries without one.
        Carries an Idempotency-Key like ``knowledge_update``, so a retry counts each entry once.

        >>> hub.knowledge_batch_update([{"knowledge_id": kid, "is_helpful": True, "case": {"outcome": "ok"}}])
        {'results': [{'index': 0, 'knowledge_id': '...', 'ok': True}], 'succeeded': 1, 'failed': 0}
        """
        return self._request(_calls.knowledge_batch_update(feedback_list, search_id, idempotency_key))

    def knowledge_bulk_save(self, items: list[dict[str, Any]], *, idempotency_key: str | None = None) -> Json:
        """Save up to 500 new items at once (POST /api/knowledge/bulk), each shaped as the REST body of a
        single save; per-item ``ok`` with its ``knowledge_id``, or ``error``: the good ones land even when
        some fail. Carries an Idempotency-Key like ``knowledge_save``, so a retry stores nothing twice.

        >>> hub.knowledge_bulk_save([{"task": "Rotate keys", "content": "Monthly", "types": ["strategy"]}])
        {'results': [{'index': 0, 'knowledge_id': 'knowledge-...', 'ok': True}], 'succeeded': 1, 'failed': 0}
        """
        return self._request(_calls.knowledge_bulk_save(items, idempotency_key))

    def knowledge_export(self, output: Any = None, *, scopes: list[str] | None = None,
                         passphrase: str | None = None, vectors: bool = True, deadline: ClientDeadline = "client") -> Any:
        """Export everything this token may read (GET /api/export, streamed JSON Lines): to ``output`` (a path or
        an open text file; returns ``{"records": n}``), or, without it, as a list of records (header first).
        Secrets stay encrypted; ``passphrase`` seals them for another installation (sent as a header).
        ``vectors=False`` leaves the items' vectors out: about an eighth the size, and the importing hub embeds again.

        The export must be over within ``deadline`` seconds: the client's (120 by default) unless given here
        (``None``: no bound). A line, and the records collected without ``output``, over ``max_response_bytes``
        are refused (`KnowHubError` ``response_too_large``).

        >>> hub.knowledge_export("backup.jsonl", deadline=3600)
        {'records': 42}
        """
        call, bound = _calls.knowledge_export(scopes, passphrase, vectors), self._deadline(deadline)
        try:
            with bounded_by(bound):
                request = self._http.build_request("GET", call.path, params=clean_params(call.params),
                                                   headers=wire_headers(call.headers), timeout=bound.timeout(self.timeout))
                response = self._http.send(request, stream=True)
                try:
                    if not response.is_success:
                        body = Body(response, self.max_response_bytes, bound)
                        for chunk in response.iter_bytes():
                            body.add(chunk)
                        result_of(response, bytes(body.data))
                    with Export(response, output, self.max_response_bytes, bound) as export:
                        for chunk in response.iter_bytes():
                            export.add(chunk)
                        export.finish()
                    return export.result()
                finally:
                    response.close()
        except httpx.TransportError as exc:
            raise connection_failed(call, exc, self.base_url)

    def knowledge_import(self, path: Any, data: bytes | str | None = None, *, scopes: list[str] | None = None,
                         types: list[str] | None = None, passphrase: str | None = None, wait: bool = True,
                         timeout: float = IMPORT_WAIT_SECONDS) -> Json:
        """Import a file (POST /api/import; curators): our export (.jsonl), a CSV or Markdown (.md, .zip), the
        format from the extension. ``path`` is read, or names ``data``. The server imports it by a job; this waits
        for it (`wait_for_job`, up to ``timeout`` seconds) and returns the report: ``imported``, ``updated``,
        ``skipped`` (unchanged), ``failed`` (line and reason). A file refused as a whole raises `JobFailed` (or,
        refused at once by its name, scopes or passphrase, `KnowHubError`). ``wait=False`` returns the job
        (``{"job": {"id", "status", "url"}}``) at once: its ``progress`` counts the records read, its ``result``
        is the report.

        >>> hub.knowledge_import("tips.csv", scopes=["org:acme"])["imported"]
        12
        >>> hub.wait_for_job(hub.knowledge_import("big.jsonl", wait=False), timeout=3600)["result"]["imported"]
        5000
        """
        name, content = _calls.import_upload(path, data)
        try:
            response, body = self._send("POST", "/api/import", Deadline(self.deadline), files={"file": (name, content)},
                                        data=_calls.import_form(scopes, types, passphrase))
        except httpx.TransportError as exc:
            raise connection_failed(Call("POST", "/api/import"), exc, self.base_url)
        queued = result_of(response, body)
        if not wait:
            return queued
        return _import_report(self.wait_for_job(queued["job"], timeout=timeout))

    def document_ingest(self, source: Any, data: bytes | str | None = None, *, scopes: list[str] | None = None,
                        types: list[str] | None = None, chunk_size: int | None = None,
                        chunk_overlap: int | None = None) -> Json:
        """Read a document into knowledge items (POST /api/documents), by a job: ``source`` is a URL, a path to a
        file (Markdown, text, HTML, PDF, DOCX), or a file name for ``data``. Returns the document (status
        ``queued``; ``repeated`` when the same file was read into the same scopes before). Wait for it with
        ``wait_for_job(document["job"])``, then ``document_get`` lists its ``items``.

        >>> doc = hub.document_ingest("runbook.md", scopes=["org:acme"])
        >>> hub.wait_for_job(doc["job"]); hub.document_get(doc["id"])["status"]
        'done'
        """
        request = _calls.document_ingest(source, data, scopes=scopes, types=types, chunk_size=chunk_size,
                                         chunk_overlap=chunk_overlap)
        try:
            response, body = self._send("POST", "/api/documents", Deadline(self.deadline), **request)
        except httpx.TransportError as exc:
            raise connection_failed(Call("POST", "/api/documents"), exc, self.base_url)
        return result_of(response, body)

    def document_list(self, status: str | None = None, limit: int = 20, offset: int = 0) -> Json:
        """Documents this token may read, newest first (GET /api/documents); ``next_offset`` pages on. Each carries
        ``items_count`` and its first few ``items`` (``items_more``: how many more) and ``outcome`` as counts;
        ``document_get`` has every id."""
        return self._request(_calls.document_list(status, limit, offset))

    def document_get(self, document_id: str) -> Json:
        """One document's status, progress, error and ``items`` (GET /api/documents/{id})."""
        return self._request(_calls.document_get(document_id))

    def knowledge_list(self, limit: int = 10, types: list[str] | None = None, scopes: list[str] | None = None, *,
                       cursor: str | None = None) -> Json:
        """Newest first (GET /api/knowledge); pass the reply's ``next`` as ``cursor`` for the next page.

        >>> page = hub.knowledge_list(limit=20, types=["strategy"])
        >>> more = hub.knowledge_list(limit=20, cursor=page["next"]) if page["next"] else None
        """
        return self._request(_calls.knowledge_list(limit, types, scopes, cursor))

    def knowledge_filters(self) -> Json:
        """The filter operators and keys valid for this token, with sample values."""
        return self._request(_calls.knowledge_filters())

    def knowledge_slim(self, model: str = "", *, dry_run: bool = False) -> Json:
        """Queue a merge of near-duplicates (POST /api/knowledge/slim) → ``{"job": {...}}``.

        ``model`` defaults to the server's configured LLM (the seed's "google/gemini-2.0-flash-001"
        when the server is set up that way).

        >>> hub.wait_for_job(hub.knowledge_slim(dry_run=True))["result"]
        """
        return self._request(_calls.knowledge_slim(model, dry_run))

    def resource_save(self, id: str, title: str, body: str = "", secure_body: str = "", content_type: str = "text",
                      metadata: dict[str, Any] | None = None, scopes: list[str] | None = None,
                      expires_at: str | None = None, *, idempotency_key: str | None = None) -> Json:
        """Save a resource (code, credential, cookie); ``secure_body`` is encrypted and never echoed.

        >>> hub.resource_save("credentials/website_a", "Site A test account", body="100 logins a day",
        ...                   secure_body="user: a@example.com\\npassword: ...", content_type="credential")
        """
        return self._request(_calls.resource_save(id=id, title=title, body=body, secure_body=secure_body,
                                                  content_type=content_type, metadata=metadata, scopes=scopes,
                                                  expires_at=expires_at, idempotency_key=idempotency_key))

    def resource_get(self, id: str, reveal: bool = False) -> Json:
        """A resource; ``reveal=True`` adds ``secure_body`` (tokens with secret access; audited).

        >>> hub.resource_get("credentials/website_a", reveal=True)["secure_body"]
        """
        return self._request(_calls.resource_get(id, reveal))

    def job_get(self, job: str | Json) -> Json:
        """A job's state: ``status`` (queued, running, succeeded, failed), ``result``, ``error``."""
        return self._request(_calls.job_get(_calls.job_id_of(job)))

    # Curators' operations: a curator token (create_agent_token --curate), or the owner for an item's own
    # versions, archive and activate.

    def knowledge_versions(self, knowledge_id: str) -> Json:
        """An item's earlier texts, newest first (GET /api/knowledge/{id}/versions)."""
        return self._request(_calls.knowledge_versions(knowledge_id))

    def knowledge_restore_version(self, knowledge_id: str, version: int) -> Json:
        """Put version ``version``'s text back; the replaced text becomes a new version."""
        return self._request(_calls.knowledge_restore_version(knowledge_id, version))

    def knowledge_archive(self, knowledge_id: str, reason: str = "") -> Json:
        """Archive an item: search and the list skip it until `knowledge_activate`."""
        return self._request(_calls.knowledge_set_status(knowledge_id, "archive", reason))

    def knowledge_activate(self, knowledge_id: str, reason: str = "") -> Json:
        """Make an archived item active again."""
        return self._request(_calls.knowledge_set_status(knowledge_id, "activate", reason))

    def knowledge_unmerge(self, knowledge_id: str) -> Json:
        """Undo a merge: the originals are active again, the merged item archived (curator token)."""
        return self._request(_calls.knowledge_unmerge(knowledge_id))

    def merge_proposals(self, status: str = "pending") -> Json:
        """Stored merge proposals (curator token): ``pending`` await review; ``approved``, ``edited``, ``rejected``."""
        return self._request(_calls.merge_proposals(status))

    def merge_approve(self, ids: list[str], *, task: str | None = None, content: str | None = None) -> Json:
        """Merge a proposed group: with the proposal's text, or your own ``task``/``content`` (curator token)."""
        return self._request(_calls.merge_approve(ids, task, content))

    def merge_reject(self, ids: list[str]) -> Json:
        """Reject a proposed group; none of its pairs is proposed again (curator token)."""
        return self._request(_calls.merge_reject(ids))

    def evolve_rollback(self, job: str | Json) -> Json:
        """Put back the text an evolve job replaced (curator token)."""
        return self._request(_calls.evolve_rollback(_calls.job_id_of(job)))

    def evolve_accept(self, job: str | Json) -> Json:
        """Put an evolve job's rewrite awaiting review live (curator token) → the item."""
        return self._request(_calls.evolve_review(_calls.job_id_of(job), "accept"))

    def evolve_reject(self, job: str | Json) -> Json:
        """Turn down an evolve job's rewrite awaiting review (curator token) → the job."""
        return self._request(_calls.evolve_review(_calls.job_id_of(job), "reject"))

    def knowledge_supersede(self, knowledge_id: str, successor_id: str) -> Json:
        """Mark an item superseded by ``successor_id``: search skips it; `knowledge_activate` brings it back."""
        return self._request(_calls.knowledge_supersede(knowledge_id, successor_id))

    def conflict_list(self, status: str = "open", *, kind: str | None = None, knowledge_id: str | None = None,
                      limit: int = 50, offset: int = 0) -> Json:
        """Conflicts between close items (curator token); ``status`` open (default) … or all."""
        return self._request(_calls.conflict_list(status, kind, knowledge_id, limit, offset))

    def conflict_get(self, conflict_id: int) -> Json:
        """One conflict with both items (curator token)."""
        return self._request(_calls.conflict_get(conflict_id))

    def conflict_resolve(self, conflict_id: int, action: str, *, successor_id: str | None = None,
                         task: str | None = None, content: str | None = None) -> Json:
        """Settle a conflict: ``keep_both``, ``supersede``, ``merge`` or ``dismiss`` (curator token)."""
        return self._request(_calls.conflict_resolve(conflict_id, action, successor_id, task, content))

    def conflict_reopen(self, conflict_id: int) -> Json:
        """Undo a conflict's resolution; it is open again (curator token)."""
        return self._request(_calls.conflict_reopen(conflict_id))
    # Webhooks (curator tokens): deliveries are POSTed to the URL, signed as Standard Webhooks describes.

    def webhook_subscribe(self, url: str, events: list[str], *, scopes: list[str] | None = None,
                          description: str = "") -> Json:
        """Subscribe ``url`` to ``events`` in ``scopes`` (default: the token's); the reply's ``secret`` verifies
        each delivery's ``webhook-signature``.

        >>> hook = hub.webhook_subscribe("https://ci.example.com/knowhub", ["knowledge.created"])
        >>> hook["secret"].startswith("whsec_")
        True
        """
        return self._request(_calls.webhook_subscribe(url, events, scopes, description))

    def webhook_list(self) -> Json:
        """This token's subscriptions with their state (GET /api/webhooks)."""
        return self._request(_calls.webhook_list())

    def webhook_get(self, webhook_id: str, *, reveal: bool = False) -> Json:
        """One subscription with its recent ``deliveries``; ``reveal=True`` adds its ``secret``."""
        return self._request(_calls.webhook_get(webhook_id, reveal))

    def webhook_change(self, webhook_id: str, *, url: str | None = None, events: list[str] | None = None,
                       scopes: list[str] | None = None, description: str | None = None,
                       active: bool | None = None) -> Json:
        """Change a subscription; ``active=False`` pauses it, ``active=True`` resumes a paused one."""
        return self._request(_calls.webhook_change(webhook_id, url=url, events=events, scopes=scopes,
                                                   description=description, active=active))

    def webhook_delete(self, webhook_id: str) -> Json:
        """Delete a subscription and its delivery log."""
        return self._request(_calls.webhook_delete(webhook_id))

    def webhook_resend(self, webhook_id: str, delivery_id: str) -> Json:
        """Send a finished delivery again (same ``webhook-id``, a new attempt)."""
        return self._request(_calls.webhook_resend(webhook_id, delivery_id))

    def wait_for_job(self, job: str | Json, timeout: float = 60.0, interval: float = 0.5) -> Json:
        """Poll until the job succeeded (returned) or failed (`JobFailed`); `JobTimeout` after ``timeout`` s.

        >>> hub.wait_for_job(hub.knowledge_slim(dry_run=True), timeout=30)["status"]
        'succeeded'
        """
        job_id, end, state = _calls.job_id_of(job), time.monotonic() + timeout, None
        while True:
            try:
                state = self._request(_calls.job_get(job_id), self._poll_deadline(end))
            except ConnectionFailed as exc:
                if time.monotonic() < end:
                    raise
                raise JobTimeout(f"job {job_id}: no answer from the server within {timeout}s",
                                 job=state or {"id": job_id}) from exc
            if _job_done(state):
                return state
            if time.monotonic() >= end:
                raise JobTimeout(f"job {job_id} still {state['status']} after {timeout}s", job=state)
            time.sleep(min(interval, max(0.0, end - time.monotonic())))

    def focus_goal_knowledge(self, goal_description: str, top_k: int = 3, min_score: int = 3) -> str:
        """Goal focus (seed 003): search the goal's description, return the "📚 相关知识" block.

        >>> print(hub.focus_goal_knowledge("Log in to site A and export the orders"))
        📚 相关知识 (1 条):
        1. [knowledge-...] Log in to site A
           Use the test account; 100 logins a day
           types: tool; score 3, quality 3.0
        """
        return goal_knowledge_text(self.knowledge_search(goal_description, top_k=top_k, min_score=min_score)["results"])

    def build_context(self, enable_agentic_filters: bool = False, *, tool_name: str = "search_knowledge_base") -> str:
        """Agno's ``<knowledge_base>`` instructions; with agentic filters, the valid keys from the server. They name
        the search tool the model has: Agno's ``search_knowledge_base``, or ``knowledge_search`` with `tools`.

        >>> system_prompt += hub.build_context(enable_agentic_filters=True)
        >>> schemas, dispatch = tools(hub)
        >>> system_prompt += hub.build_context(enable_agentic_filters=True, tool_name="knowledge_search")
        """
        return build_context_text(self.knowledge_filters() if enable_agentic_filters else None, tool_name)


class AsyncKnowHub(_Base):
    """The asyncio twin of `KnowHub`: the same methods, awaited.

    >>> async with AsyncKnowHub("http://localhost:8000", token="kh_...") as hub:
    ...     hits = await hub.knowledge_search("staging login")
    """

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 deadline: float | None = DEFAULT_DEADLINE, retry: RetryPolicy | None = None,
                 transport: httpx.AsyncBaseTransport | None = None):
        super().__init__(base_url, token, timeout=timeout, deadline=deadline, retry=retry)
        self._http = httpx.AsyncClient(transport=transport, **self._client_kwargs())

    async def __aenter__(self) -> AsyncKnowHub:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, method: str, path: str, deadline: Deadline, **kwargs: Any) -> tuple[httpx.Response, bytes]:
        """See `KnowHub._send`."""
        async def attempt() -> tuple[httpx.Response, bytes]:
            request = self._http.build_request(method, path, timeout=deadline.timeout(self.timeout), **kwargs)
            response = await self._http.send(request, stream=True)
            try:
                body = Body(response, self.max_response_bytes, deadline)
                async for chunk in response.aiter_bytes():
                    body.add(chunk)
            finally:
                await response.aclose()
            return response, bytes(body.data)

        return await within(deadline, attempt())

    async def _request(self, call: Call, deadline: Deadline | None = None) -> Json:
        check_sendable(call)
        deadline, attempt = deadline or Deadline(self.deadline), 0
        while True:
            try:
                response, content = await self._send(call.method, call.path, deadline,
                                                     params=clean_params(call.params), json=call.json,
                                                     headers=wire_headers(call.headers))
            except httpx.TransportError as exc:
                delay = retry_after_error(call, exc, attempt, self.retry)
                if delay is None or not deadline.allows(delay):
                    raise connection_failed(call, exc, self.base_url)
            else:
                delay = retry_after_response(call, response, attempt, self.retry, content)
                if delay is None or not deadline.allows(delay):
                    return result_of(response, content)  # every endpoint answers an object
            await asyncio.sleep(delay)
            attempt += 1

    async def knowledge_search(self, query: str, top_k: int = 5, min_score: int = 3, types: list[str] | None = None,
                               *, filters: Any = None, scopes: list[str] | None = None, rank: str | None = None,
                               explain: bool = False, answer_floor: float | None = None,
                               relevance_floor: float | None = None, relevance_ratio: float | None = None,
                               include_superseded: bool = False) -> Json:
        """See `KnowHub.knowledge_search`."""
        return await self._request(_calls.knowledge_search(query, top_k, min_score, types, filters, scopes, rank,
                                                           explain, answer_floor=answer_floor,
                                                           relevance_floor=relevance_floor,
                                                           relevance_ratio=relevance_ratio,
                                                           include_superseded=include_superseded))

    async def knowledge_save(self, task: str, content: str, types: list[str], tags: dict[str, str] | None = None,
                             scopes: list[str] | None = None, owner: str | None = None, source_name: str = "",
                             source_category: str = "exp", urls: list[str] | None = None,
                             agent_id: str | None = None, submitted_by: str = "", score: int = 3,
                             message_id: str = "", *, resource_ids: list[str] | None = None,
                             idempotency_key: str | None = None, secure_resource_id: str | None = None,
                             confidence: float | None = None) -> Json:
        """See `KnowHub.knowledge_save`."""
        return await self._request(_calls.knowledge_save(
            task=task, content=content, types=types, tags=tags, scopes=scopes, owner=owner, source_name=source_name,
            source_category=source_category, urls=urls, agent_id=agent_id, submitted_by=submitted_by, score=score,
            message_id=message_id, resource_ids=resource_ids, idempotency_key=idempotency_key,
            secure_resource_id=secure_resource_id, confidence=confidence))

    async def knowledge_get(self, knowledge_id: str) -> Json:
        """See `KnowHub.knowledge_get`."""
        return await self._request(_calls.knowledge_get(knowledge_id))

    async def knowledge_update(self, knowledge_id: str, add_helpful_case: dict[str, Any] | None = None,
                               add_harmful_case: dict[str, Any] | None = None, update_score: int | None = None,
                               evolve_feedback: str | None = None, *, search_id: str | None = None,
                               idempotency_key: str | None = None) -> Json:
        """See `KnowHub.knowledge_update`."""
        return await self._request(_calls.knowledge_update(knowledge_id, add_helpful_case, add_harmful_case,
                                                           update_score, evolve_feedback, search_id, idempotency_key))

    async def knowledge_edit(self, knowledge_id: str, *, task: str | None = None, content: str | None = None,
                             tags: dict[str, str] | None = None, types: list[str] | None = None,
                             reason: str = "", base_updated_at: str | None = None) -> Json:
        """See `KnowHub.knowledge_edit`."""
        return await self._request(_calls.knowledge_edit(knowledge_id, task, content, tags, types, reason,
                                                         base_updated_at))

    async def knowledge_batch_update(self, feedback_list: list[dict[str, Any]], *, search_id: str | None = None,
                                     idempotency_key: str | None = None) -> Json:
        """See `KnowHub.knowledge_batch_update`."""
        return await self._request(_calls.knowledge_batch_update(feedback_list, search_id, idempotency_key))

    async def knowledge_bulk_save(self, items: list[dict[str, Any]], *, idempotency_key: str | None = None) -> Json:
        """See `KnowHub.knowledge_bulk_save`."""
        return await self._request(_calls.knowledge_bulk_save(items, idempotency_key))

    async def knowledge_export(self, output: Any = None, *, scopes: list[str] | None = None,
                               passphrase: str | None = None, vectors: bool = True,
                               deadline: ClientDeadline = "client") -> Any:
        """See `KnowHub.knowledge_export`."""
        call, bound = _calls.knowledge_export(scopes, passphrase, vectors), self._deadline(deadline)

        async def export() -> Any:
            async with self._http.stream("GET", call.path, params=clean_params(call.params),
                                         headers=wire_headers(call.headers),
                                         timeout=bound.timeout(self.timeout)) as response:
                if not response.is_success:
                    body = Body(response, self.max_response_bytes, bound)
                    async for chunk in response.aiter_bytes():
                        body.add(chunk)
                    result_of(response, bytes(body.data))
                with Export(response, output, self.max_response_bytes, bound) as lines:
                    async for chunk in response.aiter_bytes():
                        lines.add(chunk)
                    lines.finish()
                return lines.result()

        try:
            return await within(bound, export())
        except httpx.TransportError as exc:
            raise connection_failed(call, exc, self.base_url)

    async def knowledge_import(self, path: Any, data: bytes | str | None = None, *, scopes: list[str] | None = None,
                               types: list[str] | None = None, passphrase: str | None = None, wait: bool = True,
                               timeout: float = IMPORT_WAIT_SECONDS) -> Json:
        """See `KnowHub.knowledge_import`."""
        name, content = _calls.import_upload(path, data)
        try:
            response, body = await self._send("POST", "/api/import", Deadline(self.deadline),
                                              files={"file": (name, content)},
                                              data=_calls.import_form(scopes, types, passphrase))
        except httpx.TransportError as exc:
            raise connection_failed(Call("POST", "/api/import"), exc, self.base_url)
        queued = result_of(response, body)
        if not wait:
            return queued
        return _import_report(await self.wait_for_job(queued["job"], timeout=timeout))

    async def document_ingest(self, source: Any, data: bytes | str | None = None, *, scopes: list[str] | None = None,
                              types: list[str] | None = None, chunk_size: int | None = None,
                              chunk_overlap: int | None = None) -> Json:
        """See `KnowHub.document_ingest`."""
        request = _calls.document_ingest(source, data, scopes=scopes, types=types, chunk_size=chunk_size,
                                         chunk_overlap=chunk_overlap)
        try:
            response, body = await self._send("POST", "/api/documents", Deadline(self.deadline), **request)
        except httpx.TransportError as exc:
            raise connection_failed(Call("POST", "/api/documents"), exc, self.base_url)
        return result_of(response, body)

    async def document_list(self, status: str | None = None, limit: int = 20, offset: int = 0) -> Json:
        """See `KnowHub.document_list`."""
        return await self._request(_calls.document_list(status, limit, offset))

    async def document_get(self, document_id: str) -> Json:
        """See `KnowHub.document_get`."""
        return await self._request(_calls.document_get(document_id))

    async def knowledge_list(self, limit: int = 10, types: list[str] | None = None, scopes: list[str] | None = None,
                             *, cursor: str | None = None) -> Json:
        """See `KnowHub.knowledge_list`."""
        return await self._request(_calls.knowledge_list(limit, types, scopes, cursor))

    async def knowledge_filters(self) -> Json:
        """See `KnowHub.knowledge_filters`."""
        return await self._request(_calls.knowledge_filters())

    async def knowledge_slim(self, model: str = "", *, dry_run: bool = False) -> Json:
        """See `KnowHub.knowledge_slim`."""
        return await self._request(_calls.knowledge_slim(model, dry_run))

    async def resource_save(self, id: str, title: str, body: str = "", secure_body: str = "",
                            content_type: str = "text", metadata: dict[str, Any] | None = None,
                            scopes: list[str] | None = None, expires_at: str | None = None, *,
                            idempotency_key: str | None = None) -> Json:
        """See `KnowHub.resource_save`."""
        return await self._request(_calls.resource_save(id=id, title=title, body=body, secure_body=secure_body,
                                                        content_type=content_type, metadata=metadata, scopes=scopes,
                                                        expires_at=expires_at, idempotency_key=idempotency_key))

    async def resource_get(self, id: str, reveal: bool = False) -> Json:
        """See `KnowHub.resource_get`."""
        return await self._request(_calls.resource_get(id, reveal))

    async def job_get(self, job: str | Json) -> Json:
        """See `KnowHub.job_get`."""
        return await self._request(_calls.job_get(_calls.job_id_of(job)))

    async def knowledge_versions(self, knowledge_id: str) -> Json:
        """See `KnowHub.knowledge_versions`."""
        return await self._request(_calls.knowledge_versions(knowledge_id))

    async def knowledge_restore_version(self, knowledge_id: str, version: int) -> Json:
        """See `KnowHub.knowledge_restore_version`."""
        return await self._request(_calls.knowledge_restore_version(knowledge_id, version))

    async def knowledge_archive(self, knowledge_id: str, reason: str = "") -> Json:
        """See `KnowHub.knowledge_archive`."""
        return await self._request(_calls.knowledge_set_status(knowledge_id, "archive", reason))

    async def knowledge_activate(self, knowledge_id: str, reason: str = "") -> Json:
        """See `KnowHub.knowledge_activate`."""
        return await self._request(_calls.knowledge_set_status(knowledge_id, "activate", reason))

    async def knowledge_unmerge(self, knowledge_id: str) -> Json:
        """See `KnowHub.knowledge_unmerge`."""
        return await self._request(_calls.knowledge_unmerge(knowledge_id))

    async def merge_proposals(self, status: str = "pending") -> Json:
        """See `KnowHub.merge_proposals`."""
        return await self._request(_calls.merge_proposals(status))

    async def merge_approve(self, ids: list[str], *, task: str | None = None, content: str | None = None) -> Json:
        """See `KnowHub.merge_approve`."""
        return await self._request(_calls.merge_approve(ids, task, content))

    async def merge_reject(self, ids: list[str]) -> Json:
        """See `KnowHub.merge_reject`."""
        return await self._request(_calls.merge_reject(ids))

    async def evolve_rollback(self, job: str | Json) -> Json:
        """See `KnowHub.evolve_rollback`."""
        return await self._request(_calls.evolve_rollback(_calls.job_id_of(job)))

    async def evolve_accept(self, job: str | Json) -> Json:
        """See `KnowHub.evolve_accept`."""
        return await self._request(_calls.evolve_review(_calls.job_id_of(job), "accept"))

    async def evolve_reject(self, job: str | Json) -> Json:
        """See `KnowHub.evolve_reject`."""
        return await self._request(_calls.evolve_review(_calls.job_id_of(job), "reject"))

    async def knowledge_supersede(self, knowledge_id: str, successor_id: str) -> Json:
        """See `KnowHub.knowledge_supersede`."""
        return await self._request(_calls.knowledge_supersede(knowledge_id, successor_id))

    async def conflict_list(self, status: str = "open", *, kind: str | None = None, knowledge_id: str | None = None,
                            limit: int = 50, offset: int = 0) -> Json:
        """See `KnowHub.conflict_list`."""
        return await self._request(_calls.conflict_list(status, kind, knowledge_id, limit, offset))

    async def conflict_get(self, conflict_id: int) -> Json:
        """See `KnowHub.conflict_get`."""
        return await self._request(_calls.conflict_get(conflict_id))

    async def conflict_resolve(self, conflict_id: int, action: str, *, successor_id: str | None = None,
                               task: str | None = None, content: str | None = None) -> Json:
        """See `KnowHub.conflict_resolve`."""
        return await self._request(_calls.conflict_resolve(conflict_id, action, successor_id, task, content))

    async def conflict_reopen(self, conflict_id: int) -> Json:
        """See `KnowHub.conflict_reopen`."""
        return await self._request(_calls.conflict_reopen(conflict_id))
    async def webhook_subscribe(self, url: str, events: list[str], *, scopes: list[str] | None = None,
                                description: str = "") -> Json:
        """See `KnowHub.webhook_subscribe`."""
        return await self._request(_calls.webhook_subscribe(url, events, scopes, description))

    async def webhook_list(self) -> Json:
        """See `KnowHub.webhook_list`."""
        return await self._request(_calls.webhook_list())

    async def webhook_get(self, webhook_id: str, *, reveal: bool = False) -> Json:
        """See `KnowHub.webhook_get`."""
        return await self._request(_calls.webhook_get(webhook_id, reveal))

    async def webhook_change(self, webhook_id: str, *, url: str | None = None, events: list[str] | None = None,
                             scopes: list[str] | None = None, description: str | None = None,
                             active: bool | None = None) -> Json:
        """See `KnowHub.webhook_change`."""
        return await self._request(_calls.webhook_change(webhook_id, url=url, events=events, scopes=scopes,
                                                         description=description, active=active))

    async def webhook_delete(self, webhook_id: str) -> Json:
        """See `KnowHub.webhook_delete`."""
        return await self._request(_calls.webhook_delete(webhook_id))

    async def webhook_resend(self, webhook_id: str, delivery_id: str) -> Json:
        """See `KnowHub.webhook_resend`."""
        return await self._request(_calls.webhook_resend(webhook_id, delivery_id))

    async def wait_for_job(self, job: str | Json, timeout: float = 60.0, interval: float = 0.5) -> Json:
        """See `KnowHub.wait_for_job`."""
        job_id, end, state = _calls.job_id_of(job), time.monotonic() + timeout, None
        while True:
            try:
                state = await self._request(_calls.job_get(job_id), self._poll_deadline(end))
            except ConnectionFailed as exc:
                if time.monotonic() < end:
                    raise
                raise JobTimeout(f"job {job_id}: no answer from the server within {timeout}s",
                                 job=state or {"id": job_id}) from exc
            if _job_done(state):
                return state
            if time.monotonic() >= end:
                raise JobTimeout(f"job {job_id} still {state['status']} after {timeout}s", job=state)
            await asyncio.sleep(min(interval, max(0.0, end - time.monotonic())))

    async def focus_goal_knowledge(self, goal_description: str, top_k: int = 3, min_score: int = 3) -> str:
        """See `KnowHub.focus_goal_knowledge`."""
        found = await self.knowledge_search(goal_description, top_k=top_k, min_score=min_score)
        return goal_knowledge_text(found["results"])

    async def build_context(self, enable_agentic_filters: bool = False, *,
                            tool_name: str = "search_knowledge_base") -> str:
        """See `KnowHub.build_context`."""
        return build_context_text(await self.knowledge_filters() if enable_agentic_filters else None, tool_name)


def _import_report(job: Json) -> Json:
    """A succeeded import job's report (its ``result``)."""
    report = job.get("result")
    if not isinstance(report, dict):
        raise KnowHubError(f"expected an import job with its report as result, got {type(report).__name__}",
                           code="invalid_reply")
    return report


def _job_done(state: Json) -> bool:
    status = state.get("status")
    if not isinstance(status, str):
        raise KnowHubError(f"expected a job with a status, got a reply without one (keys {sorted(state)[:10]})",
                           code="invalid_reply")
    if status == "failed":
        raise JobFailed(f"job {state.get('id')} failed: {state.get('error') or 'no error given'}", job=state)
    return status == "succeeded"
