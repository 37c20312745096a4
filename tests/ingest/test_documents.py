"""Document ingestion (issue 16): files and URLs become items through a job; re-reading keeps what did not change."""
import io
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import docx
import pytest
from django.contrib.auth.models import Group
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.platypus import Paragraph, SimpleDocTemplate

from agents.models import AgentToken
from ingest.documents import document_run
from ingest.models import Document
from jobs.models import Job
from knowledge.models import Knowledge
from tests.callers import agent_client, person_in, session_client
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db

RUNBOOK = """# Deploy runbook

## Build

Build the image with the release tag. Push it to the registry.

## Rollback

Redeploy the previous tag. Check the health endpoint first.

## Contacts

Page the on-call engineer.
"""


@pytest.fixture
def writer():
    return agent_client("writer", ["team:a"], writable_scopes=["team:a"])


def upload(client, name: str, data: bytes, **fields):
    file = io.BytesIO(data)
    file.name = name
    return client.post("/api/documents", {"file": file, **fields}, format="multipart")


def run(document: dict) -> dict:
    """What the worker does for the document's job, done here."""
    document_run(job_id=document["job"]["id"], worker="test/1/a")
    return document


def test_a_markdown_upload_becomes_items_titled_by_their_headings_through_a_job(writer):
    reply = upload(writer, "runbook.md", RUNBOOK.encode(), scopes="team:a", types="strategy")
    assert reply.status_code == 202, reply.content
    queued = reply.json()
    assert (queued["status"], queued["kind"], queued["repeated"]) == ("queued", "markdown", False)
    assert Job.objects.get(pk=queued["job"]["id"]).kind == "ingest"
    run(queued)
    done = writer.get(f"/api/documents/{queued['id']}").json()
    assert done["status"] == "done" and done["title"] == "Deploy runbook" and done["progress"]["stage"] == "storing"
    items = [Knowledge.objects.get(pk=i) for i in done["items"]]
    assert [k.task for k in items] == ["Deploy runbook > Build", "Deploy runbook > Rollback", "Deploy runbook > Contacts"]
    rollback = items[1]
    assert rollback.types == ["strategy"] and rollback.scopes == ["team:a"] and rollback.owner == "agent:writer"
    document = rollback.source["document"]
    assert (document["kind"], document["uri"], document["chunk"]) == ("markdown", "runbook.md", 1)
    assert len(document["content_hash"]) == 64 and document["document_id"] == queued["id"]
    job = writer.get(f"/api/jobs/{queued['job']['id']}").json()
    assert job["status"] == "succeeded" and job["result"]["created"] == 3


def test_the_same_file_again_does_nothing_and_a_changed_one_keeps_the_unchanged_chunks(writer):
    first = run(upload(writer, "runbook.md", RUNBOOK.encode(), scopes="team:a").json())
    ids = writer.get(f"/api/documents/{first['id']}").json()["items"]
    writer.put(f"/api/knowledge/{ids[0]}", {"add_helpful_case": {"outcome": "built"}}, format="json")
    again = upload(writer, "runbook.md", RUNBOOK.encode(), scopes="team:a")
    assert again.status_code == 202 and again.json()["repeated"] and again.json()["id"] == first["id"]
    changed = RUNBOOK.replace("Redeploy the previous tag.", "Roll back with the deploy tool.").replace(
        "## Contacts\n\nPage the on-call engineer.\n", "")
    second = run(upload(writer, "runbook.md", changed.encode(), scopes="team:a").json())
    outcome = writer.get(f"/api/documents/{second['id']}").json()["outcome"]
    assert (outcome["kept"], outcome["updated"], outcome["archived"], outcome["created"]) == ([ids[0]], [ids[1]], [ids[2]], [])
    build = Knowledge.objects.get(pk=ids[0])
    assert build.helpful == 1 and build.versions.count() == 0  # kept: id, feedback and text as they were
    rollback = Knowledge.objects.get(pk=ids[1])
    assert "deploy tool" in rollback.content and rollback.versions.get().content.startswith("Redeploy")
    assert Knowledge.objects.get(pk=ids[2]).status == "archived"
    other_team = agent_client("other", ["team:b"], writable_scopes=["team:b"])
    theirs = run(upload(other_team, "runbook.md", RUNBOOK.encode(), scopes="team:b").json())
    assert set(other_team.get(f"/api/documents/{theirs['id']}").json()["items"]).isdisjoint(ids)


def pdf_bytes() -> bytes:
    out = io.BytesIO()
    styles = getSampleStyleSheet()
    SimpleDocTemplate(out).build([Paragraph("Incident handbook", styles["Title"]),
                                  Paragraph("Declare an incident when customers are affected for more than five "
                                            "minutes. Open a channel and name an incident lead.", styles["BodyText"])])
    return out.getvalue()


def docx_bytes() -> bytes:
    document = docx.Document()
    document.add_heading("Onboarding", level=0)
    document.add_heading("Accounts", level=1)
    document.add_paragraph("Request the VPN account on the first day; it takes a day to approve.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


@pytest.mark.parametrize("name, data, expected", [
    ("handbook.pdf", pdf_bytes, "Declare an incident"),
    ("onboarding.docx", docx_bytes, "Request the VPN account"),
])
def test_pdf_and_docx_files_made_here_are_read_into_items(writer, name, data, expected):
    document = run(upload(writer, name, data(), scopes="team:a").json())
    done = writer.get(f"/api/documents/{document['id']}").json()
    assert done["status"] == "done", done["error"]
    assert any(expected in Knowledge.objects.get(pk=i).content for i in done["items"])


def test_a_corrupt_file_fails_its_document_and_job_with_the_reason(writer):
    document = run(upload(writer, "broken.pdf", b"%PDF-1.7 truncated", scopes="team:a").json())
    failed = writer.get(f"/api/documents/{document['id']}").json()
    assert failed["status"] == "failed" and failed["error"] and failed["items"] == []
    assert Job.objects.get(pk=document["job"]["id"]).status == "failed"


@pytest.mark.parametrize("change", ["revoked", "narrowed to another scope"])
def test_a_document_whose_token_changed_after_queueing_fails_and_stores_nothing(writer, change):
    queued = upload(writer, "runbook.md", RUNBOOK.encode(), scopes="team:a").json()
    tokens = AgentToken.objects.filter(agent_id="writer")
    if change == "revoked":
        tokens.update(is_active=False)
    else:
        tokens.update(readable_scopes=["team:b"], writable_scopes=["team:b"])

    run(queued)

    document = Document.objects.get(pk=queued["id"])
    assert document.status == "failed" and ("revoked" in document.error or "team:a" in document.error)
    assert Job.objects.get(pk=queued["job"]["id"]).status == "failed"
    assert not Knowledge.objects.exists()


def test_a_document_queued_by_a_curator_made_viewer_since_stores_nothing(django_user_model):
    user = person_in(django_user_model, "curator", "cara")
    queued = upload(session_client(user), "runbook.md", RUNBOOK.encode(), scopes="team:a").json()
    user.groups.set([Group.objects.get(name="viewer")])

    run(queued)

    assert Document.objects.get(pk=queued["id"]).status == "failed" and not Knowledge.objects.exists()


class Page(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        body = (b"<html><head><title>Wiki: on-call</title></head><body><nav>menu</nav><article><h1>On-call</h1>"
                b"<p>Acknowledge a page within five minutes.</p></article><footer>footer</footer></body></html>")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def page_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/wiki/on-call"
    server.shutdown()


def test_a_url_on_an_allow_listed_loopback_server_is_fetched_and_read(writer, page_url, settings):
    settings.KNOWHUB_FETCH_ALLOW = ["127.0.0.1"]
    reply = writer.post("/api/documents", {"url": page_url, "scopes": ["team:a"]}, format="json")
    assert reply.status_code == 202, reply.content
    run(reply.json())
    done = writer.get(f"/api/documents/{reply.json()['id']}").json()
    assert (done["status"], done["kind"]) == ("done", "html")
    (item,) = [Knowledge.objects.get(pk=i) for i in done["items"]]
    assert item.task == "On-call" and "five minutes" in item.content and "menu" not in item.content


@pytest.mark.parametrize("url, reason", [
    ("http://127.0.0.1:9/", "loopback"),
    ("http://169.254.169.254/latest/meta-data", "link-local"),
    ("http://10.0.0.1/wiki", "private"),
    ("ftp://example.com/file.md", "only http and https"),
    ("http://user:pw@example.com/", "credentials"),
])
def test_a_url_that_may_not_be_fetched_is_a_400_naming_the_url_and_queues_nothing(writer, url, reason):
    reply = writer.post("/api/documents", {"url": url, "scopes": ["team:a"]}, format="json")
    assert reply.status_code == 400 and "url" in reply.json()["error"]["fields"]
    assert reason in reply.json()["error"]["message"]
    assert not Document.objects.exists() and not Job.objects.exists()


def test_an_unknown_type_is_415_and_a_file_over_the_limit_413_naming_the_file(writer, settings):
    unknown = upload(writer, "photo.png", b"\x89PNG", scopes="team:a")
    assert unknown.status_code == 415 and "file" in unknown.json()["error"]["fields"]
    settings.KNOWHUB_DOCUMENT_MAX_BYTES = 100
    large = upload(writer, "big.md", b"# Big\n\n" + b"x" * 200, scopes="team:a")
    assert large.status_code in (400, 413) and "file" in large.json()["error"]["fields"]
    assert not Document.objects.exists()


def test_documents_and_their_jobs_are_visible_only_to_readers_of_their_scopes(writer):
    document = upload(writer, "runbook.md", RUNBOOK.encode(), scopes="team:a").json()
    outsider = agent_client("outsider", ["team:b"])
    reader = agent_client("reader", ["team:a"], writable_scopes=[])
    assert outsider.get(f"/api/documents/{document['id']}").status_code == 404
    assert outsider.get(f"/api/jobs/{document['job']['id']}").status_code == 404
    assert outsider.get("/api/documents").json()["count"] == 0
    assert reader.get(f"/api/jobs/{document['job']['id']}").status_code == 200
    assert [d["id"] for d in reader.get("/api/documents").json()["results"]] == [document["id"]]
    refused = upload(reader, "runbook.md", RUNBOOK.encode(), scopes="team:a")
    assert refused.status_code == 403


@pytest.mark.django_db(transaction=True)
def test_a_document_is_read_by_the_real_worker_and_its_items_are_embedded(celery_worker):
    client = agent_client("writer", ["team:a"], writable_scopes=["team:a"])
    document = upload(client, "runbook.md", RUNBOOK.encode(), scopes="team:a").json()
    wait_for(lambda: Document.objects.get(pk=document["id"]).status in ("done", "failed"), timeout=120,
             message="the worker to read the document")
    done = client.get(f"/api/documents/{document['id']}").json()
    assert done["status"] == "done", done["error"]
    wait_for(lambda: Knowledge.objects.filter(pk__in=done["items"], embedding__isnull=False).count() == 3, timeout=120,
             message="the worker to embed the document's items")
    found = client.get("/api/knowledge/search", {"q": "roll back to the previous tag", "top_k": 1}).json()
    assert found["results"][0]["task"] == "Deploy runbook > Rollback"


def items_of(client, document) -> list[Knowledge]:
    return [Knowledge.objects.get(pk=i) for i in client.get(f"/api/documents/{document['id']}").json()["items"]]


def test_an_older_version_uploaded_again_is_read_again_and_a_new_chunk_size_re_chunks(writer):
    v1, v2 = RUNBOOK, RUNBOOK.replace("Redeploy the previous tag.", "Use the deploy tool.")
    run(upload(writer, "runbook.md", v1.encode(), scopes="team:a").json())
    run(upload(writer, "runbook.md", v2.encode(), scopes="team:a").json())
    back = upload(writer, "runbook.md", v1.encode(), scopes="team:a").json()
    assert not back["repeated"]
    run(back)
    assert "Redeploy the previous tag" in items_of(writer, back)[1].content
    finer = run(upload(writer, "runbook.md", v1.encode(), scopes="team:a", chunk_size="200", chunk_overlap="0").json())
    assert not writer.get(f"/api/documents/{finer['id']}").json()["outcome"]["unchanged"]


def test_identical_chunks_keep_one_item_each_and_a_renamed_heading_renames_the_item(writer):
    twice = "# Doc\n\n## A\n\nSame words.\n\n## B\n\nSame words.\n"
    first = items_of(writer, run(upload(writer, "d.md", twice.encode(), scopes="team:a").json()))
    assert [k.task for k in first] == ["Doc > A", "Doc > B"]
    renamed = "# Doc\n\n## New\n\nOther words.\n\n## A\n\nSame words.\n\n## Beta\n\nSame words.\n"
    second = run(upload(writer, "d.md", renamed.encode(), scopes="team:a").json())
    outcome = writer.get(f"/api/documents/{second['id']}").json()["outcome"]
    assert set(outcome["kept"]) == {k.id for k in first} and outcome["archived"] == []
    assert Knowledge.objects.get(pk=first[1].id).task == "Doc > Beta"


def test_scopes_in_another_order_are_the_same_document(writer):
    both = agent_client("both", ["team:a", "team:b"], writable_scopes=["team:a", "team:b"])
    first = run(upload(both, "runbook.md", RUNBOOK.encode(), scopes="team:b,team:a").json())
    again = upload(both, "runbook.md", RUNBOOK.encode(), scopes="team:a,team:b").json()
    assert again["repeated"] and again["id"] == first["id"] and again["scopes"] == ["team:a", "team:b"]


def test_a_run_whose_claim_is_no_longer_the_latest_stores_nothing(writer):
    from jobs.services import job_claim

    document = upload(writer, "runbook.md", RUNBOOK.encode(), scopes="team:a").json()
    job_id = document["job"]["id"]
    stale = job_claim(job_id=job_id, worker="dead/1/a")
    from ingest import documents as ingestion

    real_claim = ingestion.job_claim
    ingestion.job_claim = lambda **kw: stale  # this run believes it holds the first claim...
    try:
        job_claim(job_id=job_id, worker="live/2/b")  # ...which a re-sent copy has since replaced
        document_run(job_id=job_id, worker="dead/1/a")
    finally:
        ingestion.job_claim = real_claim
    assert not Knowledge.objects.exists() and Document.objects.get(pk=document["id"]).status != "done"


@pytest.mark.parametrize("field, value", [("chunk_size", "²"), ("chunk_size", "99999999999999999999"),
                                          ("chunk_overlap", "-1"), ("scopes", "not a scope")])
def test_hostile_form_fields_are_a_400_naming_the_field(writer, field, value):
    reply = upload(writer, "n.md", b"# N\n\nx", **{"scopes": "team:a", field: value})
    assert reply.status_code == 400 and field in reply.json()["error"]["fields"]


@pytest.mark.parametrize("params", [{"offset": "9223372036854775808"}, {"offset": "1000001"}, {"ofset": "1"}])
def test_list_parameters_past_their_bounds_are_a_400_naming_them(writer, params):
    reply = writer.get("/api/documents", params)
    assert reply.status_code == 400 and set(params) <= set(reply.json()["error"]["fields"]), reply.content


@pytest.mark.django_db(transaction=True)
def test_one_file_uploaded_several_times_at_once_is_one_document_and_one_job():
    import threading

    from django.db import connections

    from ingest.documents import document_ingest
    from jobs.models import Job
    from tests.callers import acting

    start, outcomes = threading.Barrier(6), []

    def send():
        try:
            start.wait()
            document, new = document_ingest(acting("agent:writer"), scopes=["team:a"], name="runbook.md",
                                            data=RUNBOOK.encode())
            outcomes.append((str(document.id), new))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len({document for document, _ in outcomes}) == 1 and sorted(new for _, new in outcomes) == [False] * 5 + [True]
    assert Document.objects.count() == 1 and Job.objects.filter(kind="ingest").count() == 1


@pytest.mark.parametrize("given", ["file", "url"])
def test_a_filename_beside_a_file_or_url_is_a_400_naming_filename_and_queues_nothing(writer, given):
    if given == "file":
        reply = upload(writer, "a.md", b"# A\n\nb", filename="b.md", scopes="team:a")
    else:
        reply = writer.post("/api/documents", {"url": "http://127.0.0.1:9/x.md", "filename": "x.md",
                                               "scopes": ["team:a"]}, format="json")
    assert reply.status_code == 400 and list(reply.json()["error"]["fields"]) == ["filename"], reply.content
    assert not Document.objects.exists() and not Job.objects.exists()


def test_the_mcp_tools_operation_refuses_a_filename_beside_a_url_as_a_400(writer):
    from agents import operations
    from agents.caller import Caller
    from agents.chain import ChainError
    from agents.models import AgentToken

    caller = Caller.for_token(AgentToken.objects.get(agent_id="writer"))
    with pytest.raises(ChainError) as refused:  # what the MCP tool document_ingest runs (api/mcp_server._op)
        operations.run("document_ingest", caller, data={"url": "http://127.0.0.1:9/x.md", "filename": "x.md"})
    assert refused.value.status == 400 and list(refused.value.api_fields()) == ["filename"]
    assert not Document.objects.exists()


def headings(count: int) -> bytes:
    return "".join(f"# Heading {n}\n\nText of section {n}.\n\n" for n in range(count)).encode()


def test_a_document_of_more_chunks_than_the_limit_fails_its_job_naming_it_and_stores_nothing(writer, settings):
    settings.KNOWHUB_DOCUMENT_MAX_ITEMS = 5
    over = run(upload(writer, "many.md", headings(6), scopes="team:a").json())
    failed = writer.get(f"/api/documents/{over['id']}").json()
    job = writer.get(f"/api/jobs/{over['job']['id']}").json()
    assert failed["status"] == "failed" and job["status"] == "failed"
    assert "more than 5 items (KNOWHUB_DOCUMENT_MAX_ITEMS)" in job["error"] and job["error"] in failed["error"]
    assert not Knowledge.objects.exists()


def test_a_document_of_exactly_the_limit_of_chunks_is_read(writer, settings):
    settings.KNOWHUB_DOCUMENT_MAX_ITEMS = 5
    at = run(upload(writer, "five.md", headings(5), scopes="team:a").json())
    done = writer.get(f"/api/documents/{at['id']}").json()
    assert done["status"] == "done" and len(done["items"]) == 5 and Knowledge.objects.count() == 5


def test_the_list_carries_counts_and_the_first_item_ids_and_the_detail_every_id(writer):
    document = run(upload(writer, "seven.md", headings(7), scopes="team:a").json())
    detail = writer.get(f"/api/documents/{document['id']}").json()
    assert len(detail["items"]) == 7 and len(detail["outcome"]["created"]) == 7

    [listed] = writer.get("/api/documents").json()["results"]
    assert (listed["items"], listed["items_count"], listed["items_more"]) == (detail["items"][:5], 7, 2)
    assert listed["outcome"] == {"created": 7, "updated": 0, "kept": 0, "archived": 0, "unchanged": False}
