"""Imports by a job: POST /api/import answers 202 at once, the worker imports and reports progress, the report
is the job's result, the upload (bytes and passphrase) lives only as long as the job, and a job run twice imports
nothing twice."""
import dataclasses
import io

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from rest_framework.test import APIClient

from agents.models import AgentToken
from ingest import imports
from ingest.export import export_records
from ingest.imports import import_run
from ingest.models import ImportUpload
from jobs.models import Job
from jobs.services import job_claim
from knowledge.models import Knowledge
from resources import crypto
from resources.models import Resource
from resources.services import resource_create
from tests.callers import acting, agent_client, person_in, session_client
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db

CSV = "task,content,types\nRotate keys,Every month,strategy\nBad row,x,nonsense\nDrain a node,Cordon first,tool\n"
ROWS = "task,content,types\n" + "".join(f"Step {i},Do thing {i},tool\n" for i in range(60))


@pytest.fixture
def curator_agent():
    return agent_client("curator_agent", ["org:acme"], writable_scopes=["org:acme"], can_curate=True)


def post_import(client, name: str, data: bytes, **fields):
    file = io.BytesIO(data)
    file.name = name
    return client.post("/api/import", {"file": file, **fields}, format="multipart")


def run(reply) -> Job:
    """What the worker does for the reply's job, done here."""
    job_id = reply.json()["job"]["id"]
    import_run(job_id=job_id, worker="test/1/a")
    return Job.objects.get(pk=job_id)


def test_an_import_answers_202_with_a_queued_job_whose_result_is_the_report(curator_agent):
    reply = post_import(curator_agent, "tips.csv", CSV.encode(), scopes="org:acme")

    assert reply.status_code == 202, reply.content
    queued = reply.json()["job"]
    assert queued["status"] == "queued" and queued["url"] == f"/api/jobs/{queued['id']}"
    assert Knowledge.objects.count() == 0  # nothing imported in the request
    job = Job.objects.get(pk=queued["id"])
    assert (job.kind, job.requested_by, job.progress["file"]) == ("import", "agent:curator_agent", "tips.csv")

    run(reply)
    done = curator_agent.get(queued["url"]).json()
    assert done["status"] == "succeeded"
    report = done["result"]
    assert (report["format"], report["imported"], report["updated"], report["skipped"]) == ("csv", 2, 0, 0)
    assert [f["line"] for f in report["failed"]] == [3] and "types" in report["failed"][0]["reason"]
    assert sorted(report["knowledge_ids"]) == sorted(Knowledge.objects.values_list("id", flat=True))
    assert done["progress"]["done"] == done["progress"]["total"] == 3


def test_the_import_writes_as_the_requests_caller_with_its_rights_not_the_systems(curator_agent):
    reply = post_import(curator_agent, "tips.csv", b"task,content,types,scopes\nT,C,tool,org:other\n", scopes="org:acme")
    report = run(reply).result

    assert report["imported"] == 0 and "org:other" in report["failed"][0]["reason"]
    assert not Knowledge.objects.exists()


def test_a_token_revoked_after_queueing_fails_its_import_and_nothing_is_imported(curator_agent):
    reply = post_import(curator_agent, "tips.csv", CSV.encode(), scopes="org:acme")
    AgentToken.objects.filter(agent_id="curator_agent").update(is_active=False)

    job = run(reply)

    assert job.status == "failed" and "revoked" in job.error
    assert not Knowledge.objects.exists() and not ImportUpload.objects.exists()


def test_a_token_that_is_no_longer_a_curators_when_its_import_runs_imports_nothing(curator_agent):
    reply = post_import(curator_agent, "tips.csv", CSV.encode(), scopes="org:acme")
    AgentToken.objects.filter(agent_id="curator_agent").update(can_curate=False)

    job = run(reply)

    assert job.status == "failed" and "curator" in job.error and not Knowledge.objects.exists()


def test_the_import_writes_with_the_tokens_rights_when_it_runs_not_when_it_was_queued(curator_agent):
    reply = post_import(curator_agent, "tips.csv", b"task,content,types,scopes\nT,C,tool,org:acme\n")
    AgentToken.objects.filter(agent_id="curator_agent").update(writable_scopes=["org:other"])

    report = run(reply).result

    assert report["imported"] == 0 and "org:acme" in report["failed"][0]["reason"]
    assert not Knowledge.objects.exists()


@pytest.mark.parametrize("change", ["disabled", "deleted", "made a viewer"])
def test_a_person_whose_account_changed_after_queueing_imports_nothing(django_user_model, change):
    user = person_in(django_user_model, "curator", "cara")
    reply = post_import(session_client(user), "tips.csv", CSV.encode(), scopes="org:acme")
    assert reply.status_code == 202, reply.content
    if change == "disabled":
        django_user_model.objects.filter(pk=user.pk).update(is_active=False)
    elif change == "deleted":
        user.delete()
    else:
        user.groups.set([Group.objects.get(name="viewer")])

    job = run(reply)

    assert job.status == "failed" and ("disabled" in job.error or "no longer write" in job.error)
    assert not Knowledge.objects.exists() and not ImportUpload.objects.exists()


def test_progress_is_visible_while_the_import_runs_and_written_at_most_a_few_times_a_second(curator_agent, monkeypatch):
    from jobs import services as job_services

    seen, writes = [], []
    write = job_services.job_progress  # what the import's ProgressWriter calls

    def watched(**kwargs):
        writes.append(kwargs["progress"])
        write(**kwargs)
        job = Job.objects.get(pk=kwargs["job_id"])  # what GET /api/jobs/{id} shows meanwhile
        seen.append((job.status, job.progress["done"], job.progress["total"]))

    monkeypatch.setattr(job_services, "job_progress", watched)
    reply = post_import(curator_agent, "steps.csv", ROWS.encode(), scopes="org:acme")
    run(reply)

    assert seen[0] == ("running", 1, 60) and seen[-1] == ("running", 60, 60)
    assert all(status == "running" for status, _, _ in seen)
    assert len(writes) < 20  # throttled: not one write per row

    monkeypatch.setattr(imports, "PROGRESS_INTERVAL", 0)
    reply = post_import(curator_agent, "steps.csv", ROWS.encode(), scopes="org:acme")
    seen.clear()
    assert run(reply).result["skipped"] == 60
    assert [done for _, done, _ in seen] == list(range(1, 61))


def sealed_export(passphrase: str) -> bytes:
    writer = acting("agent:ops")
    resource_create(writer, resource_id="credentials/vault", title="vault", scopes=["org:acme"],
                    secure_body="s3cr3t", content_type="credential")
    operator = dataclasses.replace(acting("command:export"), can_read_secrets=True)
    from api.transfer import jsonl

    text = "".join(jsonl(export_records(operator, scopes=None, passphrase=passphrase, embedding_model="x")))
    Resource.objects.all().delete()  # as on the installation it moves to
    return text.encode()


def test_the_passphrase_is_stored_encrypted_and_the_upload_is_deleted_when_the_job_succeeds(curator_agent):
    passphrase = "correct horse battery staple"
    data = sealed_export(passphrase)
    reply = post_import(curator_agent, "move.jsonl", data, passphrase=passphrase)
    assert reply.status_code == 202, reply.content

    upload = ImportUpload.objects.get()
    assert upload.passphrase != passphrase and crypto.decrypt(upload.passphrase) == passphrase
    with connection.cursor() as cursor:  # nowhere in the row, nor in the job, as typed
        cursor.execute(f"SELECT t::text FROM {ImportUpload._meta.db_table} t")
        assert passphrase not in cursor.fetchone()[0]
        cursor.execute(f"SELECT t::text FROM {Job._meta.db_table} t")
        assert all(passphrase not in row[0] for row in cursor.fetchall())

    job = run(reply)
    assert job.status == "succeeded" and job.result["imported"] == 1 and job.result["failed"] == []
    assert Resource.objects.filter(pk="credentials/vault").exists()
    assert not ImportUpload.objects.exists()


def test_a_file_refused_in_the_worker_fails_the_job_with_the_reason_and_its_upload_is_deleted(curator_agent):
    reply = post_import(curator_agent, "latin.csv", "task,content,types\nCafé,x,tool\n".encode("latin-1"),
                        scopes="org:acme", passphrase="some passphrase")
    assert reply.status_code == 202, reply.content
    assert ImportUpload.objects.count() == 1

    job = run(reply)
    assert job.status == "failed" and "UTF-8" in job.error
    assert not ImportUpload.objects.exists()
    failed = curator_agent.get(f"/api/jobs/{job.id}").json()
    assert (failed["status"], failed["result"]) == ("failed", None) and "UTF-8" in failed["error"]


def test_a_crashed_run_fails_the_job_and_deletes_its_upload(curator_agent, monkeypatch):
    from ingest import tasks

    def boom(*args, **kwargs):
        raise RuntimeError("the disk is gone")

    monkeypatch.setattr(imports.importer, "import_file", boom)
    reply = post_import(curator_agent, "tips.csv", CSV.encode(), scopes="org:acme")
    with pytest.raises(RuntimeError):
        tasks.run_import.run(reply.json()["job"]["id"])
    job = Job.objects.get(pk=reply.json()["job"]["id"])
    assert job.status == "failed" and "the disk is gone" in job.error
    assert not ImportUpload.objects.exists()


@pytest.mark.parametrize("name, data, fields, field", [
    ("notes.xls", b"x", {"scopes": "org:acme"}, "file"),
    ("backup.jsonl", b'{"task": "not a header"}\n', {}, "file"),
    ("tips.csv", CSV.encode(), {"scopes": "acme"}, "scopes"),
])
def test_a_file_refused_as_a_whole_by_its_name_scopes_or_header_is_a_400_at_once_and_nothing_is_queued(
        curator_agent, name, data, fields, field):
    reply = post_import(curator_agent, name, data, **fields)

    assert reply.status_code == 400 and field in reply.json()["error"]["fields"], reply.content
    assert not Job.objects.filter(kind="import").exists() and not ImportUpload.objects.exists()


def test_a_sealed_export_without_its_passphrase_is_a_400_naming_it_and_nothing_is_stored(curator_agent):
    reply = post_import(curator_agent, "move.jsonl", sealed_export("correct horse battery staple"))

    assert reply.status_code == 400 and "passphrase" in reply.json()["error"]["fields"], reply.content
    assert not ImportUpload.objects.exists()


def test_the_job_run_twice_imports_nothing_twice(curator_agent):
    reply = post_import(curator_agent, "steps.csv", ROWS.encode(), scopes="org:acme")
    job_id = reply.json()["job"]["id"]
    upload = ImportUpload.objects.get()
    # a worker claims the job, stores the first 25 rows and dies before it ends it...
    assert job_claim(job_id=job_id, worker="dead/1/a") == 1
    first_rows = "".join(ROWS.splitlines(keepends=True)[:26]).encode()
    imports.importer.import_file(imports.caller_of(upload.caller), name="steps.csv", data=first_rows,
                                 scopes=["org:acme"])
    assert Knowledge.objects.count() == 25

    import_run(job_id=job_id, worker="live/2/b")  # ...the copy re-sent for it claims it again and ends it
    job = Job.objects.get(pk=job_id)
    assert (job.status, job.attempts) == ("succeeded", 2)
    assert (job.result["imported"], job.result["skipped"], job.result["failed"]) == (35, 25, [])
    assert Knowledge.objects.count() == 60

    import_run(job_id=job_id, worker="late/3/c")  # a duplicate message of the ended job: nothing happens
    assert Job.objects.get(pk=job_id).result == job.result and Knowledge.objects.count() == 60

    again = run(post_import(curator_agent, "steps.csv", ROWS.encode(), scopes="org:acme"))
    assert (again.result["imported"], again.result["skipped"]) == (0, 60) and Knowledge.objects.count() == 60


def test_a_stale_claim_ends_nothing_and_keeps_the_upload_for_the_latest(curator_agent):
    reply = post_import(curator_agent, "tips.csv", CSV.encode(), scopes="org:acme")
    job_id = reply.json()["job"]["id"]
    job_claim(job_id=job_id, worker="dead/1/a")
    job_claim(job_id=job_id, worker="live/2/b")  # re-sent while the first still ran

    assert imports.import_end(job_id=job_id, attempt=1, result={"imported": 0}) is False
    assert ImportUpload.objects.exists() and Job.objects.get(pk=job_id).status == "running"


@pytest.mark.parametrize("caller, status", [
    ("the curator token that asked", 200),
    ("another token of its agent reading fewer scopes", 404),
    ("another curator token", 404),
    ("a read-only token", 404),
    ("a person with the curator role", 200),
    ("a viewer", 200),  # people with a role read every scope, and every job
    ("anonymous", 401),
])
def test_who_may_read_an_import_job(curator_agent, django_user_model, caller, status):
    job_id = post_import(curator_agent, "tips.csv", CSV.encode(), scopes="org:acme").json()["job"]["id"]
    client = {
        "the curator token that asked": lambda: curator_agent,
        "another token of its agent reading fewer scopes": lambda: agent_client("curator_agent", ["org:other"]),
        "another curator token": lambda: agent_client("other_curator", ["org:acme"], writable_scopes=["org:acme"],
                                                      can_curate=True),
        "a read-only token": lambda: agent_client("reader", ["org:acme"]),
        "a person with the curator role": lambda: session_client(person_in(django_user_model, "curator", "cara")),
        "a viewer": lambda: session_client(person_in(django_user_model, "viewer", "vic")),
        "anonymous": APIClient,
    }[caller]()

    assert client.get(f"/api/jobs/{job_id}").status_code == status


def test_a_persons_import_job_is_not_read_by_any_token(django_user_model):
    person = session_client(person_in(django_user_model, "curator", "cara"))
    reply = post_import(person, "tips.csv", CSV.encode(), scopes="org:acme")
    assert reply.status_code == 202, reply.content

    token = agent_client("curator_agent", ["org:acme"], writable_scopes=["org:acme"], can_curate=True)
    assert token.get(reply.json()["job"]["url"]).status_code == 404
    assert person.get(reply.json()["job"]["url"]).status_code == 200


def test_the_import_command_still_imports_in_process_with_its_report(tmp_path, capsys):
    from django.core.management import call_command

    path = tmp_path / "tips.csv"
    path.write_text(CSV)
    call_command("import", str(path), scopes="org:acme")

    assert "imported 2" in capsys.readouterr().out and not Job.objects.filter(kind="import").exists()


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_import_job_and_keeps_the_report(celery_worker):
    client = agent_client("curator_agent", ["org:acme"], writable_scopes=["org:acme"], can_curate=True)
    reply = post_import(client, "tips.csv", CSV.encode(), scopes="org:acme")
    url = reply.json()["job"]["url"]

    wait_for(lambda: client.get(url).json()["status"] in ("succeeded", "failed"), timeout=120,
             message="the worker to import the file")
    done = client.get(url).json()
    assert done["status"] == "succeeded" and done["result"]["imported"] == 2, done
    assert not ImportUpload.objects.exists()


# --- refused at the request, nothing queued -----------------------------------------------------------------------

@pytest.mark.parametrize("header", ["with its key check", "written before the key check"])
def test_a_wrong_passphrase_is_a_400_naming_it_at_once_and_nothing_is_queued(curator_agent, header):
    import json

    data = sealed_export("correct horse battery staple")
    if header == "written before the key check":  # its first sealed secret is opened instead
        lines = [json.loads(line) for line in data.decode().splitlines()]
        del lines[0]["secrets"]["check"]
        data = "\n".join(map(json.dumps, lines)).encode()

    reply = post_import(curator_agent, "move.jsonl", data, passphrase="not the passphrase at all")

    assert reply.status_code == 400, reply.content
    error = reply.json()["error"]
    assert "passphrase" in error["fields"] and "does not open" in error["message"]
    assert not Job.objects.filter(kind="import").exists() and not ImportUpload.objects.exists()
    assert post_import(curator_agent, "move.jsonl", data, passphrase="correct horse battery staple").status_code == 202


@pytest.mark.parametrize("name", ["tips.csv", "notes.md", "backup.jsonl"])
def test_scopes_the_caller_may_not_write_are_a_403_at_once_and_nothing_is_queued(curator_agent, name):
    data = {"tips.csv": CSV.encode(), "notes.md": b"# Keys\n\nRotate them.\n",
            "backup.jsonl": b'{"kind": "knowhub-export", "version": 1}\n{"kind": "end"}\n'}[name]

    reply = post_import(curator_agent, name, data, scopes="org:acme,org:other")  # writes org:acme only

    assert reply.status_code == 403, reply.content
    assert "org:other" in reply.json()["error"]["message"] and "org:acme" not in reply.json()["error"]["message"]
    assert not Job.objects.filter(kind="import").exists() and not ImportUpload.objects.exists()
    # as a document's: the same scopes are refused the same way
    file = io.BytesIO(b"# Keys\n\nRotate them.\n")
    file.name = "notes.md"
    writer = agent_client("writer", ["org:acme"], writable_scopes=["org:acme"])
    assert writer.post("/api/documents", {"file": file, "scopes": "org:other"}, format="multipart").status_code == 403


@pytest.mark.parametrize("given_as", ["file", "content"])
def test_a_file_over_the_import_limit_is_a_413_naming_the_limit_and_the_command_that_has_none(
        curator_agent, settings, given_as):
    settings.KNOWHUB_IMPORT_MAX_BYTES = 100
    data = ("task,content,types\n" + "Rotate the keys,Monthly,strategy\n" * 5).encode()
    assert len(data) > 100

    if given_as == "file":
        reply = post_import(curator_agent, "tips.csv", data, scopes="org:acme")
    else:
        reply = curator_agent.post("/api/import", {"content": data.decode(), "filename": "tips.csv",
                                                   "scopes": ["org:acme"]}, format="json")

    assert reply.status_code == 413, reply.content
    error = reply.json()["error"]
    assert error["code"] == "too_large" and list(error["fields"]) == [given_as]
    assert "100 bytes" in error["message"] and "manage.py import" in error["message"]
    assert not Job.objects.filter(kind="import").exists() and not ImportUpload.objects.exists()
    assert post_import(curator_agent, "tips.csv", data[:100], scopes="org:acme").status_code == 202  # at the limit


def test_the_import_command_takes_a_file_over_the_apis_limit(tmp_path, settings, capsys):
    from django.core.management import call_command

    settings.KNOWHUB_IMPORT_MAX_BYTES = 10
    path = tmp_path / "steps.csv"
    path.write_text(ROWS)

    call_command("import", str(path), scopes="org:acme")

    assert "imported 60" in capsys.readouterr().out and Knowledge.objects.count() == 60


# --- what a job stores never holds what the database cannot ------------------------------------------------------

@pytest.mark.parametrize("text, line", [
    ("task,content,types\nGood one,c,strategy\nBad one,c,strat\x00egy\nGood two,c,strategy\n", 3),
    ("task,content,ty\x00pes\nA row,c,strategy\n", 2),
], ids=["cell", "header"])
def test_a_nul_in_a_csv_cell_or_header_leaves_the_job_succeeded_with_its_report(curator_agent, text, line):
    reply = post_import(curator_agent, "nul.csv", text.encode(), scopes="org:acme")
    assert reply.status_code == 202, reply.content

    job = run(reply)

    assert job.status == "succeeded", job.error
    failure = next(f for f in job.result["failed"] if f["line"] == line)
    assert "\ufffd" in failure["reason"] and "\x00" not in failure["reason"]
    assert sorted(job.result["knowledge_ids"]) == sorted(Knowledge.objects.values_list("id", flat=True))
    assert job.result["imported"] == Knowledge.objects.count() == text.count("Good")


def test_a_jobs_error_never_holds_what_its_column_cannot_store(curator_agent):
    reply = post_import(curator_agent, "tips.csv", CSV.encode(), scopes="org:acme")
    job_id = reply.json()["job"]["id"]
    job_claim(job_id=job_id, worker="test/1/a")

    assert imports.import_end(job_id=job_id, attempt=1, error="cell 'strat\x00egy' and \ud800 refused") is True

    job = Job.objects.get(pk=job_id)
    assert (job.status, job.error) == ("failed", "cell 'strat\ufffdegy' and \ufffd refused")
    assert not ImportUpload.objects.exists()
