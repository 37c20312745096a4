"""The Documents page: read a file or a URL into items and follow it; import a file, see the report; export."""
import io
import re

import pytest
from django.utils.html import escape

from ingest.documents import document_run
from ingest.imports import import_run
from jobs.services import job_claim, job_progress
from ingest.models import Document
from jobs.models import Job
from knowledge.models import Knowledge

pytestmark = pytest.mark.django_db

RUNBOOK = b"""# Deploy runbook

## Build

Build the image with the release tag. Push it to the registry.

## Rollback

Redeploy the previous tag. Check the health endpoint first.
"""
CSV = "task,content,types\nRotate keys,Every month,strategy\n"


def named(name: str, data: bytes) -> io.BytesIO:
    file = io.BytesIO(data)
    file.name = name
    return file


def upload(client, **fields):
    return client.post("/documents/upload/", {"scopes": "team:a", **fields}, HTTP_HX_REQUEST="true")


def import_file(client, name: str, text: str, **fields):
    return client.post("/documents/import/", {"file": named(name, text.encode()), **fields}, HTTP_HX_REQUEST="true")


def test_the_empty_state_and_the_forms_for_a_curator(curator_client):
    page = curator_client.get("/documents/").content.decode()
    assert 'id="no-documents"' in page and "No documents yet." in page
    assert 'id="upload"' in page and 'id="import"' in page and 'href="/api/export"' in page
    assert 'href="/documents/" aria-current="page">Documents</a>' in page


def test_a_curator_uploads_markdown_and_follows_it_until_it_is_done(curator_client):
    reply = upload(curator_client, file=named("runbook.md", RUNBOOK), types=["strategy"])
    assert reply.status_code == 200, reply.content
    document = Document.objects.get()
    assert (document.status, document.scopes, document.types) == ("queued", ["team:a"], ["strategy"])
    html = reply.content.decode()
    panel = f'/documents/{document.id}/'
    assert f'hx-get="{panel}" hx-trigger="every 1s"' in html and "Queued." in html
    assert 'id="documents"' in html and 'hx-swap-oob="true"' in html and "runbook.md" in html  # the list, out of band
    assert 'hx-trigger="every 2s"' in html  # the list polls too while one is queued

    document_run(job_id=str(document.job), worker="test/1/a")
    polled = curator_client.get(panel, HTTP_HX_REQUEST="true")
    html = polled.content.decode()
    assert polled.status_code == 200 and "every 1s" not in html and ">done<" in html
    items = [Knowledge.objects.get(pk=i) for i in Document.objects.get().items]
    assert [k.task for k in items] == ["Deploy runbook > Build", "Deploy runbook > Rollback"]
    for item in items:
        assert f'href="/knowledge/{item.id}/"' in html and escape(item.task) in html
    assert "2 created" in html

    detail = curator_client.get(panel).content.decode()  # the full page
    assert "<h1>Deploy runbook</h1>" in detail and "every 1s" not in detail
    assert f'href="/knowledge/{items[0].id}/"' in detail
    listing = curator_client.get("/documents/").content.decode()
    assert "Deploy runbook" in listing and ">done<" in listing
    assert "every 2s" not in listing and "No documents yet" not in listing

    again = upload(curator_client, file=named("runbook.md", RUNBOOK), types=["strategy"])
    assert "nothing new was queued" in again.content.decode() and Document.objects.count() == 1


def test_a_private_url_is_refused_on_its_field_and_nothing_is_created(curator_client):
    reply = upload(curator_client, url="http://10.0.0.1/x")
    html = reply.content.decode()
    assert reply.status_code == 422
    assert re.search(r'id="upload-url-errors">.*private', html, re.DOTALL)
    assert not Document.objects.exists() and not Job.objects.exists()


def test_an_unknown_type_and_a_missing_file_or_scope_are_shown_in_the_form(curator_client):
    reply = upload(curator_client, file=named("photo.png", b"\x89PNG"))
    assert reply.status_code == 422 and "photo.png" in reply.content.decode()
    assert 'id="upload-file-errors"' in reply.content.decode()
    empty = curator_client.post("/documents/upload/", {}, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="upload-file-errors"' in empty and 'id="upload-scopes-errors"' in empty
    small = upload(curator_client, file=named("a.md", RUNBOOK), chunk_size=10).content.decode()
    assert 'id="upload-chunk_size-errors"' in small
    assert not Document.objects.exists()


def test_a_viewer_sees_the_list_but_no_forms_and_may_not_post(client, curator_user, viewer):
    client.force_login(curator_user)
    upload(client, file=named("runbook.md", RUNBOOK))
    viewer_client = client
    viewer_client.force_login(viewer)
    page = viewer_client.get("/documents/")
    html = page.content.decode()
    assert page.status_code == 200 and "runbook.md" in html
    assert 'id="upload"' not in html and 'id="import"' not in html and 'href="/api/export"' in html
    refused = viewer_client.post("/documents/upload/", {"file": named("b.md", RUNBOOK), "scopes": "team:a"})
    assert refused.status_code == 403
    assert viewer_client.post("/documents/import/", {"file": named("k.csv", CSV.encode())}).status_code == 403
    assert Document.objects.count() == 1 and not Knowledge.objects.filter(task="Rotate keys").exists()
    assert viewer_client.get(f"/documents/{Document.objects.get().id}/").status_code == 200


def test_anonymous_is_sent_to_log_in(client):
    for url in ["/documents/", "/documents/00000000-0000-0000-0000-000000000000/"]:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(f"/login/?next={url}")
    assert client.post("/documents/upload/").status_code == 302 and client.post("/documents/import/").status_code == 302


def test_an_unknown_document_is_404(curator_client):
    assert curator_client.get("/documents/00000000-0000-0000-0000-000000000000/").status_code == 404


def imported(client, name: str, text: str, **fields) -> str:
    """Import through the form, run the job as the worker would, then poll the panel once: its HTML."""
    queued = import_file(client, name, text, **fields)
    assert queued.status_code == 200, queued.content
    job = Job.objects.filter(kind="import").order_by("-created_at").first()
    import_run(job_id=str(job.id), worker="test/1/a")
    return client.get(f"/documents/import/?job={job.id}", HTTP_HX_REQUEST="true").content.decode()


def test_an_import_swaps_in_its_job_which_polls_while_queued_and_shows_progress_while_running(curator_client):
    html = import_file(curator_client, "keys.csv", CSV, scopes="team:a").content.decode()
    job = Job.objects.get(kind="import")
    assert f'id="import-job-{job.id}"' in html and f'hx-get="/documents/import/?job={job.id}"' in html
    assert 'hx-trigger="every 1s"' in html and "Waiting for a worker" in html and 'id="import-report"' not in html
    assert 'id="import-file"' in html or "<form" in html  # the form stays, emptied, for the next file
    assert not Knowledge.objects.filter(task="Rotate keys").exists()

    job_claim(job_id=str(job.id), worker="test/1/a")
    job_progress(job_id=job.id, progress={"file": "keys.csv", "format": "csv", "done": 1, "total": 4})
    running = curator_client.get(f"/documents/import/?job={job.id}", HTTP_HX_REQUEST="true").content.decode()
    assert running.lstrip().startswith('<div class="job import-job"') and "1 of 4 records read" in running
    assert '<progress value="1" max="4">' in running and 'hx-trigger="every 1s"' in running


def test_a_csv_import_shows_its_report_and_again_skips(curator_client):
    html = imported(curator_client, "keys.csv", CSV, scopes="team:a")
    assert 'id="import-report"' in html and "imported 1 " in html and "hx-trigger" not in html  # done: no polling
    item = Knowledge.objects.get(task="Rotate keys")
    assert item.scopes == ["team:a"] and f'href="/knowledge/{item.id}/"' in html
    again = imported(curator_client, "keys.csv", CSV, scopes="team:a")
    assert "imported 0 " in again and "skipped 1 " in again


def test_a_csv_with_a_bad_row_shows_the_failed_line(curator_client):
    text = CSV + "Bad row,Some content,nonsense\n"
    html = imported(curator_client, "mixed.csv", text, scopes="team:a")
    assert "imported 1 " in html and "failed 1" in html and re.search(r"<li>line 3: [^<]*nonsense", html)


def test_an_import_refused_in_the_worker_shows_why_and_an_empty_file_says_so(curator_client):
    html = imported(curator_client, "broken.zip", "not a zip", scopes="team:a")
    assert 'id="import-error"' in html and "The import failed" in html and 'id="import-report"' not in html
    empty = imported(curator_client, "empty.csv", "task,content,types\n", scopes="team:a")
    assert "The file held no records to import." in empty


def test_the_import_jobs_page_without_htmx_is_the_documents_page_with_the_panel(curator_client):
    imported(curator_client, "keys.csv", CSV, scopes="team:a")
    job = Job.objects.get(kind="import")
    page = curator_client.get(f"/documents/import/?job={job.id}").content.decode()
    assert "<html" in page and 'id="import-report"' in page and 'id="documents"' in page


def test_only_an_import_job_is_shown_on_the_import_panel(curator_client):
    other = Job.objects.create(kind="slim", requested_by="agent:x", params={"writable_scopes": ["team:a"]})
    assert curator_client.get(f"/documents/import/?job={other.id}").status_code == 404
    assert curator_client.get("/documents/import/?job=nonsense").status_code == 404
    assert curator_client.get("/documents/import/?job=00000000-0000-0000-0000-000000000000").status_code == 404


def test_an_import_is_shown_in_chinese(curator_client):
    html = curator_client.post("/documents/import/", {"file": named("keys.csv", CSV.encode()), "scopes": "team:a"},
                               HTTP_HX_REQUEST="true", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "Waiting for a worker" not in html and "等待" in html


def test_an_import_of_an_unknown_format_is_shown_on_the_file(curator_client):
    reply = import_file(curator_client, "notes.xls", "x")
    assert reply.status_code == 422 and 'id="import-file-errors"' in reply.content.decode()


def test_the_list_pages_and_filters_by_status(curator_client):
    for n in range(21):
        upload(curator_client, file=named(f"doc{n}.md", b"# Doc %d\n\ntext" % n))
    first = curator_client.get("/documents/").content.decode()
    assert "21 documents" in first and "Page 1 of 2" in first and 'href="?page=2"' in first
    second = curator_client.get("/documents/?page=2").content.decode()
    assert "Page 2 of 2" in second and second.count("<tr>") == 1 + 1  # the header and one row
    done = curator_client.get("/documents/?status=done", HTTP_HX_REQUEST="true").content.decode()
    assert "No done documents." in done and "<html" not in done
