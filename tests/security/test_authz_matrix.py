"""Who may do what, as one table: every REST endpoint, curation page and action, admin page and MCP tool
× every kind of caller → the designed answer; and no cell ever shows another scope's data or a secret
it was not asked to reveal.

Callers: `owner` (agent, reads+writes org:acme, secrets), `other` (agent, org:other, secrets), `reader`
(agent, reads org:acme, writes nothing), `nosecrets` (agent, reads+writes org:acme), the roles
`viewer`, `curator`, `admin` and a user with no role (`norole`; all four are staff, so the admin's own
permission checks are what is tested), and `anon`. Every cell aims at org:acme's item, job or
resource. "login" / "admin-login": a redirect to that login page.
"""
import json

import httpx2
import pytest

from tests.security.conftest import AGENTS, MARKERS, SECRETS, SESSIONS

pytestmark = pytest.mark.django_db

CALLERS = ("owner", "other", "reader", "nosecrets", "viewer", "curator", "admin", "norole", "anon")
L, AL = "login", "admin-login"

# endpoint: (method, path, body; json for /api, a form elsewhere)
ENDPOINTS = {
    "search_get": ("get", "/api/knowledge/search?q=staging", None),
    "search_post": ("post", "/api/knowledge/search", {"q": "staging"}),
    "list": ("get", "/api/knowledge", None),
    "save": ("post", "/api/knowledge", {"task": "t", "content": "c", "types": ["tool"], "scopes": ["org:acme"]}),
    "get": ("get", "/api/knowledge/{item}", None),
    "feedback": ("put", "/api/knowledge/{item}", {"add_helpful_case": {"note": "ok"}}),
    "score": ("put", "/api/knowledge/{item}", {"update_score": 5}),
    "evolve": ("put", "/api/knowledge/{item}", {"evolve_feedback": "shorter"}),
    "patch": ("patch", "/api/knowledge/{item}", {"content": "rewritten", "reason": "r"}),
    "batch_update": ("post", "/api/knowledge/batch_update", {"feedback_list": [{"knowledge_id": "{item}", "is_helpful": True}]}),
    "filters": ("get", "/api/knowledge/filters", None),
    "slim": ("post", "/api/knowledge/slim", {"dry_run": True}),
    "job": ("get", "/api/jobs/{job}", None),
    "bulk": ("post", "/api/knowledge/bulk", {"items": [{"task": "t", "content": "c", "types": ["tool"], "scopes": ["org:acme"]}]}),
    "export": ("get", "/api/export", None),
    "import": ("post", "/api/import", {"content": "task,content,types\nt,c,tool\n", "filename": "x.csv", "scopes": ["org:acme"]}),
    "ingest": ("post", "/api/documents", {"content": "# Notes\n\nx", "filename": "notes.md", "scopes": ["org:acme"]}),
    "documents": ("get", "/api/documents", None),
    "document": ("get", "/api/documents/{document}", None),
    "supersede": ("post", "/api/knowledge/{item}/supersede", {"successor_id": "{item}"}),
    "merges": ("get", "/api/merges", None),
    "conflicts": ("get", "/api/conflicts", None),
    "conflict": ("get", "/api/conflicts/{conflict}", None),
    "conflict_resolve": ("post", "/api/conflicts/{conflict}/resolve", {"action": "merge"}),
    "conflict_reopen": ("post", "/api/conflicts/{conflict}/reopen", {}),
    "evolve_accept": ("post", "/api/jobs/{job}/accept", {}),
    "evolve_reject": ("post", "/api/jobs/{job}/reject", {}),
    "resource_save": ("post", "/api/resource", {"id": "code/new", "title": "t", "scopes": ["org:acme"]}),
    "resource_get": ("get", "/api/resource/{resource}", None),
    "resource_reveal": ("get", "/api/resource/{resource}?reveal=true", None),
    "webhooks": ("get", "/api/webhooks", None),
    "webhook_subscribe": ("post", "/api/webhooks", {"url": "https://8.8.8.8/hooks/knowhub", "events": ["knowledge.created"],
                                                    "scopes": ["org:acme"]}),
    "webhook_get": ("get", "/api/webhooks/{webhook}?reveal=true", None),
    "webhook_change": ("patch", "/api/webhooks/{webhook}", {"active": False}),
    "webhook_resend": ("post", "/api/webhooks/{webhook}/deliveries/{delivery}/resend", {}),
    "webhook_delete": ("delete", "/api/webhooks/{webhook}", None),
    "schema": ("get", "/api/schema/", None),
    "docs": ("get", "/api/docs/", None),
    "ui_dashboard": ("get", "/", None),
    "ui_dashboard_ranking": ("get", "/ranking/", None),
    "ui_list": ("get", "/knowledge/?q=staging", None),
    "ui_detail": ("get", "/knowledge/{item}/", None),
    "ui_edit_form": ("get", "/knowledge/{item}/edit/", None),
    "ui_edit": ("post", "/knowledge/{item}/edit/", {"task": "t", "content": "c", "types": "tool", "tags": "", "reason": "r"}),
    "ui_feedback": ("post", "/knowledge/{item}/feedback/", {"kind": "helpful"}),
    "ui_score": ("post", "/knowledge/{item}/score/", {"score": 5}),
    "ui_explain": ("get", "/knowledge/{item}/explain/?q=staging", None),
    "ui_diff": ("get", "/knowledge/{item}/diff/?a=1&b=current", None),
    "ui_reports": ("get", "/knowledge/{item}/reports/helpful/", None),
    "ui_restore": ("post", "/knowledge/{item}/restore/1/", {}),
    "ui_unmerge": ("post", "/knowledge/{item}/unmerge/", {}),
    "ui_evolve": ("post", "/knowledge/{item}/evolve/", {"feedback": "shorter"}),
    "ui_job": ("get", "/jobs/{job}/", None),
    "ui_rollback": ("post", "/jobs/{job}/rollback/", {}),
    "ui_review": ("get", "/review/", None),
    "ui_find": ("post", "/review/find/", {}),
    "ui_approve": ("post", "/review/approve/", {}),
    "ui_reject": ("post", "/review/reject/", {}),
    "ui_conflicts": ("get", "/conflicts/", None),
    "ui_conflict_resolve": ("post", "/conflicts/{conflict}/resolve/", {"action": "merge"}),
    "ui_conflict_reopen": ("post", "/conflicts/{conflict}/reopen/", {}),
    "ui_activate": ("post", "/knowledge/{item}/activate/", {}),
    "ui_evolve_accept": ("post", "/jobs/{job}/accept/", {}),
    "ui_evolve_reject": ("post", "/jobs/{job}/reject/", {}),
    "ui_resources": ("get", "/resources/", None),
    "ui_resource": ("get", "/resources/{resource}/", None),
    "ui_reveal": ("post", "/resources/{resource}/reveal/", {}),
    "ui_playground": ("get", "/playground/", None),
    "ui_documents": ("get", "/documents/", None),
    "ui_document": ("get", "/documents/{document}/", None),
    "ui_doc_upload": ("post", "/documents/upload/", {}),
    "ui_doc_import": ("post", "/documents/import/", {}),
    "ui_webhooks": ("get", "/webhooks/", None),
    "ui_webhook_subscribe": ("post", "/webhooks/subscribe/", {}),
    "ui_webhook_pause": ("post", "/webhooks/{webhook}/pause/", {}),
    "ui_webhook_resume": ("post", "/webhooks/{webhook}/resume/", {}),
    "ui_webhook_secret": ("post", "/webhooks/{webhook}/secret/", {}),
    "ui_webhook_resend": ("post", "/webhooks/{webhook}/deliveries/{delivery}/resend/", {}),
    "ui_webhook_delete": ("post", "/webhooks/{webhook}/delete/", {}),
    "ui_audit": ("get", "/audit/", None),
    "admin_index": ("get", "/admin/", None),
    "admin_knowledge": ("get", "/admin/knowledge/knowledge/", None),
    "admin_tokens": ("get", "/admin/agents/agenttoken/", None),
    "admin_reveal_page": ("get", "/admin/resources/resource/{resource}/reveal/", None),
    "admin_reveal": ("post", "/admin/resources/resource/{resource}/reveal/", {}),
}

# The design. 409: allowed, but no LLM is configured in tests (evolve, slim, find duplicates) or
# nothing to roll back; 422: allowed, the empty form is refused.
EXPECTED = {  #        owner other reader nosec viewer curat admin norole anon
    "search_get":      (200, 200, 200, 200, 200, 200, 200, 403, 401),
    "search_post":     (200, 200, 200, 200, 200, 200, 200, 403, 401),
    "list":            (200, 200, 200, 200, 200, 200, 200, 403, 401),
    "save":            (201, 403, 403, 201, 403, 201, 201, 403, 401),
    "get":             (200, 404, 200, 200, 200, 200, 200, 403, 401),
    "feedback":        (200, 404, 200, 200, 403, 200, 200, 403, 401),  # agents: any reader; roles: curators
    "score":           (200, 404, 403, 200, 403, 200, 200, 403, 401),
    "evolve":          (409, 404, 403, 409, 403, 409, 409, 403, 401),
    "patch":           (200, 404, 403, 403, 403, 200, 200, 403, 401),  # agents: the owner only
    "batch_update":    (200, 200, 200, 200, 403, 200, 200, 403, 401),  # other: 200, the entry not found
    "filters":         (200, 200, 200, 200, 200, 200, 200, 403, 401),
    "slim":            (409, 409, 403, 409, 403, 409, 409, 403, 401),
    "job":             (200, 404, 200, 200, 200, 200, 200, 403, 401),
    "bulk":            (200, 200, 403, 200, 403, 200, 200, 403, 401),  # other: 200, the item refused
    "export":          (200, 200, 200, 200, 200, 200, 200, 403, 401),  # what each may read; secrets encrypted
    "import":          (403, 403, 403, 403, 403, 202, 202, 403, 401),  # curators only: a job
    "ingest":          (202, 403, 403, 202, 403, 202, 202, 403, 401),
    "documents":       (200, 200, 200, 200, 200, 200, 200, 403, 401),
    "document":        (200, 404, 200, 200, 200, 200, 200, 403, 401),
    # 409 below: allowed, but the aimed-at state refuses (an item superseding itself, a failed job with no
    # rewrite to review, a conflict with no proposal to merge or already open): nothing in the world changes
    "supersede":       (409, 404, 403, 403, 403, 409, 409, 403, 401),  # agents: the owner only
    "merges":          (403, 403, 403, 403, 403, 200, 200, 403, 401),  # curators only
    "conflicts":       (403, 403, 403, 403, 403, 200, 200, 403, 401),
    "conflict":        (403, 403, 403, 403, 403, 200, 200, 403, 401),
    "conflict_resolve": (403, 403, 403, 403, 403, 409, 409, 403, 401),
    "conflict_reopen": (403, 403, 403, 403, 403, 409, 409, 403, 401),
    "evolve_accept":   (403, 403, 403, 403, 403, 409, 409, 403, 401),
    "evolve_reject":   (403, 403, 403, 403, 403, 409, 409, 403, 401),
    "resource_save":   (201, 403, 403, 201, 403, 201, 201, 403, 401),
    "resource_get":    (200, 404, 200, 200, 200, 200, 200, 403, 401),
    "resource_reveal": (200, 404, 403, 403, 403, 403, 200, 403, 401),
    # webhooks: curators only (a token needs can_curate, which none of these has); each cell is rolled back
    "webhooks":          (403, 403, 403, 403, 403, 200, 200, 403, 401),
    "webhook_subscribe": (403, 403, 403, 403, 403, 201, 201, 403, 401),
    "webhook_get":       (403, 403, 403, 403, 403, 200, 200, 403, 401),
    "webhook_change":    (403, 403, 403, 403, 403, 200, 200, 403, 401),
    "webhook_resend":    (403, 403, 403, 403, 403, 202, 202, 403, 401),
    "webhook_delete":    (403, 403, 403, 403, 403, 200, 200, 403, 401),
    "schema":          (200, 200, 200, 200, 200, 200, 200, 200, 200),  # public, no data
    "docs":            (200, 200, 200, 200, 200, 200, 200, 200, 200),
    # the curation UI: sessions only (a Bearer token is not a login)
    "ui_dashboard":    (L, L, L, L, 200, 200, 200, 403, L),
    "ui_dashboard_ranking": (L, L, L, L, 200, 200, 200, 403, L),  # the panel the dashboard loads after it
    "ui_list":         (L, L, L, L, 200, 200, 200, 403, L),
    "ui_detail":       (L, L, L, L, 200, 200, 200, 403, L),
    "ui_edit_form":    (L, L, L, L, 403, 200, 200, 403, L),
    "ui_edit":         (L, L, L, L, 403, 200, 200, 403, L),
    "ui_feedback":     (L, L, L, L, 403, 200, 200, 403, L),
    "ui_score":        (L, L, L, L, 403, 200, 200, 403, L),
    "ui_explain":      (L, L, L, L, 200, 200, 200, 403, L),
    "ui_diff":         (L, L, L, L, 200, 200, 200, 403, L),
    "ui_reports":      (L, L, L, L, 200, 200, 200, 403, L),
    "ui_restore":      (L, L, L, L, 403, 200, 200, 403, L),
    "ui_unmerge":      (L, L, L, L, 403, 302, 302, 403, L),  # back to the item: it was never merged
    "ui_evolve":       (L, L, L, L, 403, 409, 409, 403, L),
    "ui_job":          (L, L, L, L, 200, 200, 200, 403, L),
    "ui_rollback":     (L, L, L, L, 403, 409, 409, 403, L),
    "ui_review":       (L, L, L, L, 200, 200, 200, 403, L),
    "ui_find":         (L, L, L, L, 403, 409, 409, 403, L),
    "ui_approve":      (L, L, L, L, 403, 422, 422, 403, L),
    "ui_reject":       (L, L, L, L, 403, 422, 422, 403, L),
    "ui_conflicts":    (L, L, L, L, 200, 200, 200, 403, L),
    "ui_conflict_resolve": (L, L, L, L, 403, 409, 409, 403, L),
    "ui_conflict_reopen": (L, L, L, L, 403, 409, 409, 403, L),
    "ui_activate":     (L, L, L, L, 403, 302, 302, 403, L),  # back to the item page (it is active already)
    "ui_evolve_accept": (L, L, L, L, 403, 409, 409, 403, L),
    "ui_evolve_reject": (L, L, L, L, 403, 409, 409, 403, L),
    "ui_resources":    (L, L, L, L, 200, 200, 200, 403, L),
    "ui_resource":     (L, L, L, L, 200, 200, 200, 403, L),
    "ui_reveal":       (L, L, L, L, 403, 403, 200, 403, L),
    "ui_playground":   (L, L, L, L, 200, 200, 200, 403, L),
    "ui_audit":        (L, L, L, L, 403, 403, 200, 403, L),
    "ui_documents":    (L, L, L, L, 200, 200, 200, 403, L),
    "ui_document":     (L, L, L, L, 200, 200, 200, 403, L),
    "ui_doc_upload":   (L, L, L, L, 403, 422, 422, 403, L),
    "ui_doc_import":   (L, L, L, L, 403, 422, 422, 403, L),
    "ui_webhooks":          (L, L, L, L, 403, 200, 200, 403, L),
    "ui_webhook_subscribe": (L, L, L, L, 403, 422, 422, 403, L),
    "ui_webhook_pause":     (L, L, L, L, 403, 200, 200, 403, L),
    "ui_webhook_resume":    (L, L, L, L, 403, 200, 200, 403, L),
    "ui_webhook_secret":    (L, L, L, L, 403, 200, 200, 403, L),
    "ui_webhook_resend":    (L, L, L, L, 403, 200, 200, 403, L),
    "ui_webhook_delete":    (L, L, L, L, 403, 200, 200, 403, L),
    # the Django admin: staff, then each model's own permission
    "admin_index":       (AL, AL, AL, AL, 200, 200, 200, 200, AL),  # norole: an empty index
    "admin_knowledge":   (AL, AL, AL, AL, 200, 200, 200, 403, AL),
    "admin_tokens":      (AL, AL, AL, AL, 403, 403, 403, 403, AL),  # superusers only
    "admin_reveal_page": (AL, AL, AL, AL, 403, 403, 200, 403, AL),
    "admin_reveal":      (AL, AL, AL, AL, 403, 403, 200, 403, AL),
}
REVEALS = {"resource_reveal", "ui_reveal", "admin_reveal", "mcp_resource_reveal"}  # where a 200 shows the secret

# MCP over /mcp: each tool answers a token as its REST endpoint does (a tool has no 201: success is 200);
# sessions and anonymous callers get 401 (the endpoint takes Bearer tokens only).
MCP_TOOLS = {
    "search_get": ("knowledge_search", {"query": "staging"}),
    "list": ("knowledge_list", {}),
    "save": ("knowledge_save", {"task": "t", "content": "c", "types": ["tool"], "scopes": ["org:acme"]}),
    "get": ("knowledge_get", {"knowledge_id": "{item}"}),
    "feedback": ("knowledge_update", {"knowledge_id": "{item}", "add_helpful_case": {"note": "ok"}}),
    "score": ("knowledge_update", {"knowledge_id": "{item}", "update_score": 5}),
    "evolve": ("knowledge_update", {"knowledge_id": "{item}", "evolve_feedback": "shorter"}),
    "batch_update": ("knowledge_batch_update", {"feedback_list": [{"knowledge_id": "{item}", "is_helpful": True}]}),
    "slim": ("knowledge_slim", {"dry_run": True}),
    "job": ("job_get", {"job_id": "{job}"}),
    "bulk": ("knowledge_bulk_save", {"items": [{"task": "t", "content": "c", "types": ["tool"], "scopes": ["org:acme"]}]}),
    "export": ("knowledge_export", {}),
    "import": ("knowledge_import", {"filename": "x.csv", "content": "task,content,types\nt,c,tool\n", "scopes": ["org:acme"]}),
    "ingest": ("document_ingest", {"filename": "notes.md", "content": "# Notes\n\nx", "scopes": ["org:acme"]}),
    "documents": ("document_list", {}),
    "document": ("document_get", {"document_id": "{document}"}),
    "supersede": ("knowledge_supersede", {"knowledge_id": "{item}", "successor_id": "{item}"}),
    "merges": ("merge_proposals", {}),
    "conflicts": ("conflict_list", {}),
    "conflict": ("conflict_get", {"conflict_id": "{conflict}"}),
    "conflict_resolve": ("conflict_resolve", {"conflict_id": "{conflict}", "action": "merge"}),
    "conflict_reopen": ("conflict_reopen", {"conflict_id": "{conflict}"}),
    "evolve_accept": ("evolve_accept", {"job_id": "{job}"}),
    "resource_save": ("resource_save", {"id": "code/mcp-{caller}", "title": "t", "scopes": ["org:acme"]}),
    "resource_get": ("resource_get", {"id": "{resource}"}),
    "resource_reveal": ("resource_get", {"id": "{resource}", "reveal": True}),
    "webhooks": ("webhook_list", {}),
    "webhook_subscribe": ("webhook_subscribe", {"url": "https://8.8.8.8/hooks/knowhub", "events": ["knowledge.created"]}),
    "webhook_get": ("webhook_get", {"webhook_id": "{webhook}", "reveal": True}),
    "webhook_change": ("webhook_change", {"webhook_id": "{webhook}", "active": False}),
    "webhook_resend": ("webhook_resend", {"webhook_id": "{webhook}", "delivery_id": "{delivery}"}),
    "webhook_delete": ("webhook_delete", {"webhook_id": "{webhook}"}),
}
EXPECTED.update({f"mcp_{name}": tuple(200 if status in (201, 202) else status for status in EXPECTED[name][:len(AGENTS)])
                 + (401,) * (len(SESSIONS) + 1) for name in MCP_TOOLS})

CELLS = [(endpoint, caller) for endpoint in EXPECTED for caller in CALLERS]


def fill(value, world, caller):
    """`value` with {item}, {job}, {resource} (org:acme's) and {caller} filled in, however deeply nested."""
    text = json.dumps(value).replace("{caller}", caller)
    for key, real in world["acme"].items():
        text = text.replace("{%s}" % key, real)
    return json.loads(text)


def forbidden_markers(endpoint: str, caller: str) -> set[str]:
    """What this cell's body must never contain: the other scope's data, and any secret not revealed here."""
    if caller in ("norole", "anon"):
        return {*MARKERS.values(), *SECRETS.values()}
    unseen = {"owner": "org:other", "reader": "org:other", "nosecrets": "org:other", "other": "org:acme"}.get(caller)
    markers = {SECRETS["org:other"], *([MARKERS[unseen], SECRETS[unseen]] if unseen else [])}
    if not (endpoint in REVEALS and EXPECTED[endpoint][CALLERS.index(caller)] == 200):
        markers.add(SECRETS["org:acme"])
    return markers


def visible_markers(endpoint: str, caller: str) -> set[str]:
    """Search and list must show what the caller may read (so the leak check above is not vacuous)."""
    if endpoint not in ("search_get", "search_post", "list", "export", "documents", "mcp_search_get", "mcp_list",
                        "mcp_export", "mcp_documents"):
        return set()
    if caller in ("norole", "anon") or (endpoint.startswith("mcp_") and caller in SESSIONS):
        return set()
    return {"owner": {MARKERS["org:acme"]}, "reader": {MARKERS["org:acme"]}, "nosecrets": {MARKERS["org:acme"]},
            "other": {MARKERS["org:other"]}}.get(caller, set(MARKERS.values()))


def http_cell(world, endpoint: str, caller: str):
    method, path, body = ENDPOINTS[endpoint]
    client, path = world["clients"][caller], fill(path, world, caller)
    if path.startswith("/api/") and body is not None:
        response = client.generic(method.upper(), path, json.dumps(fill(body, world, caller)), "application/json")
    else:
        response = getattr(client, method)(path, *([fill(body, world, caller)] if body is not None else []))
    status = response.status_code
    if status == 302 and response["Location"].startswith(("/login/", "/admin/login/")):
        status = AL if response["Location"].startswith("/admin/") else L
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return status, content.decode()


def mcp_cell(world, url: str, endpoint: str, caller: str):
    tool, arguments = MCP_TOOLS[endpoint.removeprefix("mcp_")]
    headers = {"Accept": "application/json, text/event-stream"}
    cookies = {}
    if caller in AGENTS:
        headers["Authorization"] = f"Bearer {world['tokens'][caller]}"
    elif caller in SESSIONS:
        cookies = {"sessionid": world["clients"][caller].cookies["sessionid"].value}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": fill(arguments, world, caller)}}
    response = httpx2.post(url + "/mcp", json=body, headers=headers, cookies=cookies, timeout=60)
    if response.status_code != 200:
        return response.status_code, response.text
    result = response.json()["result"]
    if not result.get("isError"):
        return 200, response.text
    return json.loads(result["content"][0]["text"])["error"]["status"], response.text


@pytest.mark.parametrize(("endpoint", "caller"), CELLS, ids=[f"{e}-{c}" for e, c in CELLS])
def test_each_caller_gets_the_designed_answer_and_never_another_scopes_data(request, world, endpoint, caller):
    if endpoint.startswith("mcp_"):
        status, body = mcp_cell(world, request.getfixturevalue("asgi_url"), endpoint, caller)
    else:
        status, body = http_cell(world, endpoint, caller)
    assert status == EXPECTED[endpoint][CALLERS.index(caller)], body[:500]
    leaked = {marker for marker in forbidden_markers(endpoint, caller) if marker in body}
    assert not leaked, f"{endpoint} as {caller} showed {leaked}"
    missing = {marker for marker in visible_markers(endpoint, caller) if marker not in body}
    assert not missing, f"{endpoint} as {caller} did not show {missing}"


def test_the_table_covers_every_caller_and_every_curation_url():
    from curation.urls import urlpatterns

    assert all(len(row) == len(CALLERS) for row in EXPECTED.values())
    ui_paths = {ENDPOINTS[e][1].split("?")[0] for e in ENDPOINTS if e.startswith("ui_")}
    placeholders = {"<str:knowledge_id>": "{item}", "<int:number>": "1", "<uuid:job_id>": "{job}",
                    "<uuid:document_id>": "{document}", "<int:conflict_id>": "{conflict}",
                    "<uuid:webhook_id>": "{webhook}", "<uuid:delivery_id>": "{delivery}",
                    "<path:resource_id>": "{resource}", "<str:kind>": "helpful"}
    for pattern in urlpatterns:
        route = "/" + str(pattern.pattern)
        for name, value in placeholders.items():
            route = route.replace(name, value)
        assert route in ui_paths, f"{pattern.name} ({route}) is missing from the matrix"


# Every field those operations read, each of the wrong kind: whatever the operation, the body is invalid. (A body
# that is not safe JSON, a NUL byte or nesting past 32 levels, is refused by the parser before any operation: 400.)
INVALID_BODY = {"task": 5, "content": ["text"], "types": "tool", "scopes": 7, "items": "x", "reason": 5, "dry_run": "x",
                "filename": 5, "successor_id": 5, "id": 5, "title": 5, "url": 5, "events": 5, "active": "maybe",
                "action": "explode"}
REFUSED_WRITES = ("save", "patch", "slim", "bulk", "import", "ingest", "supersede", "resource_save", "webhook_subscribe",
                  "webhook_change", "conflict_resolve")


@pytest.mark.parametrize("caller", ("reader", "viewer"))
@pytest.mark.parametrize("endpoint", REFUSED_WRITES)
def test_a_caller_refused_an_operation_gets_403_whatever_the_body_and_learns_nothing_of_its_validation(
        world, endpoint, caller):
    assert EXPECTED[endpoint][CALLERS.index(caller)] == 403  # refused with a valid body (the table)
    method, path, _ = ENDPOINTS[endpoint]
    response = world["clients"][caller].generic(method.upper(), fill(path, world, caller), json.dumps(INVALID_BODY),
                                                "application/json")
    assert response.status_code == 403, response.content[:500]
    assert not response.json()["error"]["fields"], response.json()  # no field of the body named


@pytest.mark.parametrize("endpoint", REFUSED_WRITES)
def test_an_invalid_body_from_a_caller_allowed_the_operation_is_still_a_400_naming_the_field(world, endpoint):
    method, path, _ = ENDPOINTS[endpoint]
    response = world["clients"]["admin"].generic(method.upper(), fill(path, world, "admin"), json.dumps(INVALID_BODY),
                                                 "application/json")
    assert response.status_code == 400, response.content[:500]
    assert response.json()["error"]["fields"], response.json()
