"""The clients' bulk save, export and import against a live hub; the MCP tools of the same operations."""
import json
import threading

import anyio
import pytest
from knowhub_client import AsyncKnowHub

from api.mcp_server import _export_text, _op, _run_sync
from ingest.imports import import_run
from jobs.models import Job
from knowhub_client import JobFailed, JobTimeout
from knowhub_client.errors import BadRequest, InvalidArgument, KnowHubError
from resources.models import Resource

CSV = "task,content,types\nRotate keys,Every month,strategy\nDrain a node,Cordon first,tool\n"


@pytest.fixture
def import_worker(transactional_db):
    """What a worker does for import jobs, in a thread: each queued import job is run as it appears."""
    from django.db import connection

    stop = threading.Event()

    def work():
        try:
            while not stop.wait(0.05):
                for job_id in Job.objects.filter(kind="import", status="queued").values_list("id", flat=True):
                    import_run(job_id=str(job_id), worker="test-thread/1/a")
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=10)


def test_bulk_save_export_to_a_file_and_import_as_a_curator(hub, hub_for, tmp_path, import_worker):
    saved = hub.knowledge_bulk_save([{"task": "Zebra stripes", "content": "Each one differs", "types": ["definition"]},
                                     {"task": "", "types": []}])
    assert [r["ok"] for r in saved["results"]] == [True, False]
    target = tmp_path / "out.jsonl"
    assert hub.knowledge_export(target) == {"records": 3}  # the header, the one item, the end
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert records[0]["kind"] == "knowhub-export" and records[1]["task"] == "Zebra stripes"
    assert hub.knowledge_export(scopes=["org:other"])[0]["counts"] == {"resources": 0, "knowledge": 0}
    header, item, _end = hub.knowledge_export(vectors=False)
    assert header["vectors"] is False and item["task"] == "Zebra stripes" and item["embedding"] is None
    with pytest.raises(InvalidArgument, match="vectors"):
        hub.knowledge_export(vectors="false")
    with pytest.raises(KnowHubError) as refused:
        hub.knowledge_import("tips.csv", CSV)
    assert refused.value.status == 403
    curator = hub_for("curator_agent", can_curate=True)
    report = curator.knowledge_import("tips.csv", CSV, scopes=["org:acme"])
    assert (report["imported"], report["failed"]) == (2, [])
    assert curator.knowledge_import("tips.csv", CSV.encode(), scopes=["org:acme"])["skipped"] == 2


def test_the_async_client_exports_and_imports_alike(live_server, token_for, import_worker):
    token = token_for("curator_agent", can_curate=True)

    async def run():
        async with AsyncKnowHub(live_server.url, token=token) as hub:
            report = await hub.knowledge_import("tips.csv", CSV, scopes=["org:acme"])
            records = await hub.knowledge_export()
            queued = await hub.knowledge_import("tips.csv", CSV, scopes=["org:acme"], wait=False)
            done = await hub.wait_for_job(queued, timeout=30)
            return report, records, queued, done

    report, records, queued, done = anyio.run(run)
    assert report["imported"] == 2 and {r.get("task") for r in records[1:-1]} == {"Rotate keys", "Drain a node"}
    assert queued["job"]["status"] == "queued" and done["result"]["skipped"] == 2


def test_the_client_returns_the_job_without_waiting_and_its_report_when_waiting(hub_for, import_worker):
    curator = hub_for("curator_agent", can_curate=True)
    queued = curator.knowledge_import("tips.csv", CSV, scopes=["org:acme"], wait=False)
    assert set(queued) == {"job"} and queued["job"]["status"] == "queued"
    done = curator.wait_for_job(queued, timeout=30)
    assert done["result"]["imported"] == 2 and done["progress"]["total"] == 2

    with pytest.raises(JobFailed) as failed:  # refused as a whole in the worker: the job's error
        curator.knowledge_import("latin.csv", "task,content,types\nCafé,x,tool\n".encode("latin-1"), scopes=["org:acme"])
    assert "UTF-8" in failed.value.job["error"]
    with pytest.raises(KnowHubError) as refused:  # refused at once: nothing queued
        curator.knowledge_import("notes.xls", "x", scopes=["org:acme"])
    assert refused.value.status == 400 and not isinstance(refused.value, JobFailed)


def test_the_client_gives_up_waiting_after_its_timeout_while_no_worker_runs_the_import(hub_for):
    curator = hub_for("curator_agent", can_curate=True)
    with pytest.raises(JobTimeout) as waited:
        curator.knowledge_import("tips.csv", CSV, scopes=["org:acme"], timeout=0.5)
    assert waited.value.job["status"] == "queued"


@pytest.mark.django_db(transaction=True)  # _run_sync closes connections as a request's end would
def test_mcp_export_and_import_run_the_same_operations(token_for):
    curator = token_for("curator_agent", can_curate=True)
    queued = _run_sync(curator, _op("knowledge_import", {"filename": "tips.csv", "content": CSV, "scopes": ["org:acme"]}))
    assert queued["job"]["status"] == "queued"
    import_run(job_id=queued["job"]["id"], worker="test/1/a")  # what the worker does
    done = _run_sync(curator, _op("job_get", {}, job_id=queued["job"]["id"]))
    assert done["status"] == "succeeded" and done["result"]["imported"] == 2
    exported = _run_sync(curator, _export_text({}))
    lines = exported["jsonl"].splitlines()
    assert exported["records"] == len(lines) == 4 and json.loads(lines[0])["kind"] == "knowhub-export"
    without = _run_sync(curator, _export_text({"vectors": False}))["jsonl"].splitlines()
    assert json.loads(without[0])["vectors"] is False and len(without) == 4


def test_the_client_uploads_a_document_and_a_refused_url_is_a_400_naming_it(hub):
    from ingest.documents import document_run

    document = hub.document_ingest("notes.md", "# Notes\n\n## Deploy\n\nTag, then roll.\n", scopes=["org:acme"],
                                   types=["strategy"], chunk_size=400, chunk_overlap=0)
    assert (document["status"], document["kind"], document["chunk_size"]) == ("queued", "markdown", 400)
    document_run(job_id=document["job"]["id"], worker="test/1/a")  # what the worker does
    done = hub.document_get(document["id"])
    assert done["status"] == "done" and len(done["items"]) == 1
    assert hub.document_list()["results"][0]["id"] == document["id"]
    with pytest.raises(KnowHubError) as refused:
        hub.document_ingest("http://10.0.0.1/wiki", scopes=["org:acme"])
    assert refused.value.status == 400 and "url" in str(refused.value)


def test_a_passphrase_beyond_ascii_seals_an_export_that_the_same_passphrase_opens(hub_for, tmp_path, import_worker):
    """The export takes the passphrase in a header, the import in a form field: both read it as UTF-8 (WSGI hands
    headers over as Latin-1, which sealed under a garbled passphrase that the real one never opened)."""
    curator = hub_for("curator_agent", can_curate=True, can_read_secrets=True)
    curator.resource_save("credentials/vault", "vault", secure_body="s3cr3t-über", content_type="credential",
                          scopes=["org:acme"])
    target = tmp_path / "move.jsonl"
    curator.knowledge_export(target, passphrase="pässwörter für den Umzug")
    moved = target.read_bytes()
    Resource.objects.filter(pk="credentials/vault").delete()  # as on the installation it moves to

    with pytest.raises(BadRequest, match="passphrase does not open"):  # the whole file refused, nothing queued
        curator.knowledge_import("move.jsonl", moved, passphrase="passworter fur den Umzug")
    right = curator.knowledge_import("move.jsonl", moved, passphrase="pässwörter für den Umzug")

    assert right["failed"] == [] and right["imported"] == 1
    assert curator.resource_get("credentials/vault", reveal=True)["secure_body"] == "s3cr3t-über"
