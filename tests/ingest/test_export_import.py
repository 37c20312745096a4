"""Export and import (issue 16): a lossless round trip, sealed secrets, idempotent re-runs, scoped exports."""
import io
import json
import zipfile

import pytest
from django.core.management import call_command

from agents.caller import Caller
from core.errors import DomainError
from ingest.export import export_records
from ingest.importer import ImportRefused, import_file, import_path
from ingest.imports import import_run
from knowledge import feedback, services, slim
from knowledge.models import FeedbackCase, Knowledge, KnowledgeResource, KnowledgeVersion, SlimRejection
from resources.models import Resource, ResourceVersion, RevealEvent
from resources.services import resource_create, resource_save_version
from tests.callers import acting, agent_client
from tests.factories import embed_saved

pytestmark = pytest.mark.django_db

OPERATOR = Caller(principal="command:export", agent_id="export", readable_scopes=None, writable_scopes=(),
                  can_read_secrets=True, read_only=True)
IMPORTER = Caller.system("command:import")


def world() -> dict:
    """Items and resources with every kind of history an export must carry."""
    writer = acting("agent:ops")
    resource_create(writer, resource_id="credentials/site", title="site", scopes=["team:a"], secure_body="pw-1",
                    content_type="credential")
    resource_save_version(writer, resource_id="credentials/site", title="site (rotated)", secure_body="pw-2",
                          content_type="credential")
    resource_create(writer, resource_id="code/b-only", title="b", scopes=["team:b"], body="print('b')", content_type="code")
    a = services.knowledge_create(writer, task="Log in to the site", content="Use the shared account", types=["tool"],
                                  scopes=["team:a"], tags={"domain": "web"}, resource_ids=["credentials/site"],
                                  secure_resource_id="credentials/site", source={"name": "runbook", "urls": ["https://x.example"]})
    feedback.feedback_record(acting("agent:tester"), knowledge_id=a.id, helpful=True, case={"outcome": "worked"})
    feedback.feedback_record(acting("agent:other"), knowledge_id=a.id, helpful=False, case={"outcome": "locked out"})
    services.knowledge_edit(acting("user:carl"), knowledge_id=a.id, content="Use the shared account; 3 tries max",
                            reason="lockouts")
    b = services.knowledge_create(writer, task="Indent with tabs", content="Tabs, width 4", types=["strategy"], scopes=["team:a"])
    c = services.knowledge_create(writer, task="Use tabs to indent", content="Tab width 4", types=["strategy"], scopes=["team:a"])
    merged = slim.merge_group(acting("user:carl"), [b.id, c.id], text={"task": "Indent with tabs", "content": "Tabs, 4 wide"})
    slim.slim_reject(acting("user:carl"), first_id=a.id, second_id=merged.id)
    other = services.knowledge_create(writer, task="Team B only", content="Secret plans of team b", types=["plan"],
                                      scopes=["team:b"])
    embed_saved()
    return {"a": a.id, "merged": merged.id, "originals": [b.id, c.id], "other": other.id}


def export_text(caller=OPERATOR, **options) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in export_records(caller, embedding_model=_model(), **options))


def _model() -> str:
    from django.conf import settings

    return settings.KNOWHUB_EMBEDDING_MODEL


def records(text: str) -> list[dict]:
    lines = [json.loads(line) for line in text.splitlines()]
    header = {k: v for k, v in lines[0].items() if k not in ("exported_at", "secrets")}
    return [header, *lines[1:]]


def wipe() -> None:
    SlimRejection.objects.all().delete()
    FeedbackCase.objects.all().delete()
    KnowledgeVersion.objects.all().delete()
    KnowledgeResource.objects.all().delete()
    Knowledge.objects.update(merged_into=None)
    Knowledge.objects.filter(status="superseded").update(status="active", superseded_by=None)
    Knowledge.objects.all().delete()
    ResourceVersion.objects.all().delete()
    Resource.objects.all().delete()
    RevealEvent.objects.all().delete()


def test_export_import_into_an_empty_hub_then_export_gives_the_same_data():
    ids = world()
    first = export_text()
    wipe()
    report = import_file(IMPORTER, name="backup.jsonl", data=first.encode())
    assert report.failed == [] and report.imported == 2 + 5 + 1  # resources, items, the rejected pair
    assert records(export_text()) == records(first)
    restored = Knowledge.objects.get(pk=ids["a"])
    assert restored.embedding is not None and restored.secure_resource_id == "credentials/site"
    assert list(restored.feedback_cases.values_list("reported_by", flat=True)) == ["agent:tester", "agent:other"]
    assert restored.versions.get().changed_by == "user:carl"
    assert set(Knowledge.objects.filter(merged_into=ids["merged"]).values_list("id", flat=True)) == set(ids["originals"])
    site = Resource.objects.get(pk="credentials/site")
    assert site.secure_body == "pw-2" and site.versions.get().secure_body == "pw-1"


def test_an_export_without_vectors_imports_the_same_items_and_the_hub_embeds_them_again():
    ids = world()
    whole, slim = export_text(), export_text(vectors=False)
    assert len(slim) * 4 < len(whole)  # the two models' vectors were most of it
    header, *rest = records(slim)
    assert header["vectors"] is False
    assert all(r["embedding"] is None and r["embedding_model"] == "" for r in rest if r["kind"] == "knowledge")
    wipe()
    report = import_file(IMPORTER, name="backup.jsonl", data=slim.encode())
    assert report.failed == [] and report.imported == 2 + 5 + 1
    restored = Knowledge.objects.get(pk=ids["a"])
    assert restored.embedding is None  # the worker embeds it again
    embed_saved()
    again = [r for r in records(export_text()) if r["kind"] == "knowledge"]
    before = [r for r in records(whole) if r["kind"] == "knowledge"]
    assert [{**r, "embedding": None} for r in again] == [{**r, "embedding": None} for r in before]


def test_a_superseded_item_comes_back_superseded_by_its_successor():
    from knowledge.supersede import knowledge_supersede

    ids = world()
    knowledge_supersede(acting("user:carl"), knowledge_id=ids["a"], successor_id=ids["merged"])
    first = export_text()
    wipe()
    report = import_file(IMPORTER, name="backup.jsonl", data=first.encode())
    assert report.failed == []
    restored = Knowledge.objects.get(pk=ids["a"])
    assert (restored.status, restored.superseded_by_id) == ("superseded", ids["merged"])
    assert records(export_text()) == records(first)


def test_an_export_keeps_secrets_encrypted_and_a_passphrase_moves_them_to_another_installation():
    world()
    stored = Resource.objects.filter(pk="credentials/site").values_list("secure_body", flat=True)
    plain_export = export_text()
    assert "pw-2" not in plain_export and "pw-1" not in plain_export
    sealed = export_text(passphrase="correct horse battery")
    assert "pw-2" not in sealed and json.loads(sealed.splitlines()[0])["secrets"]["mode"] == "passphrase"
    assert stored  # (read through the field: decrypted)
    wipe()
    with pytest.raises(ImportRefused, match="passphrase"):
        import_file(IMPORTER, name="move.jsonl", data=sealed.encode())
    with pytest.raises(DomainError, match="passphrase does not open"):  # the file as a whole: nothing stored
        import_file(IMPORTER, name="move.jsonl", data=sealed.encode(), passphrase="not the passphrase")
    assert not Resource.objects.exists() and not Knowledge.objects.exists()
    right = import_file(IMPORTER, name="move.jsonl", data=sealed.encode(), passphrase="correct horse battery")
    assert right.failed == []
    assert Resource.objects.get(pk="credentials/site").secure_body == "pw-2"


def test_importing_the_same_export_again_changes_nothing_and_a_changed_text_becomes_a_version():
    ids = world()
    text = export_text()
    again = import_file(IMPORTER, name="backup.jsonl", data=text.encode())
    assert (again.imported, again.updated, again.failed) == (0, 0, []) and again.skipped == 2 + 5 + 1
    lines = text.splitlines()
    edited = [json.dumps({**r, "content": "Changed in the other hub"}) if r.get("id") == ids["a"] else json.dumps(r)
              for r in map(json.loads, lines)]
    report = import_file(IMPORTER, name="backup.jsonl", data="\n".join(edited).encode())
    assert report.updated == 1
    item = Knowledge.objects.get(pk=ids["a"])
    assert item.content == "Changed in the other hub" and item.versions.count() == 2


def test_an_export_holds_only_what_the_caller_may_read_and_no_secret_without_secret_access():
    ids = world()
    team_a = Caller(principal="agent:a", agent_id="a", readable_scopes=("team:a",), writable_scopes=("team:a",))
    text = export_text(team_a)
    ids_out = {r.get("id") for r in map(json.loads, text.splitlines())}
    assert ids["other"] not in ids_out and "code/b-only" not in ids_out and ids["a"] in ids_out
    assert "Secret plans" not in text
    header = json.loads(text.splitlines()[0])
    assert header["secrets"] == {"mode": "omitted"}
    site = next(r for r in map(json.loads, text.splitlines()) if r.get("id") == "credentials/site")
    assert site["secure_body"] == "" and all(v["secure_body"] == "" for v in site["versions"])


def test_bad_records_are_reported_with_their_line_while_the_good_ones_land():
    world()
    text = export_text()
    wipe()
    lines = text.splitlines()
    lines.insert(2, "{not json")
    bad_item = {**json.loads(next(line for line in lines if '"kind": "knowledge"' in line)), "id": "knowledge-20260101-bad1",
                "types": ["not-a-type"]}
    lines.append(json.dumps(bad_item))
    huge = json.loads(next(line for line in lines if '"kind": "knowledge"' in line))
    lines.append(json.dumps({**huge, "id": "knowledge-20260101-old1", "tags": {"领域": "编程", "a b": "x"}}))  # an earlier hub's
    lines.append(json.dumps({**huge, "id": "knowledge-20260101-bad2", "helpful": 2**31}))
    report = import_file(IMPORTER, name="backup.jsonl", data="\n".join(lines).encode())
    assert [f["line"] for f in report.failed] == [3, len(lines) - 2, len(lines)]
    assert "not JSON" in report.failed[0]["reason"] and "types" in report.failed[1]["reason"]
    assert "helpful" in report.failed[2]["reason"]
    assert Knowledge.objects.get(pk="knowledge-20260101-old1").tags == {"领域": "编程", "a b": "x"}
    assert Knowledge.objects.count() == 6


def test_a_file_that_is_not_an_export_or_of_an_unknown_kind_is_refused_as_a_whole():
    with pytest.raises(ImportRefused, match="not a KnowHub export"):
        import_file(IMPORTER, name="x.jsonl", data=b'{"task": "x"}\n')
    with pytest.raises(ImportRefused, match="extension"):
        import_file(IMPORTER, name="notes.docx", data=b"x")


CSV = (
    "task,content,types,tags,scopes,score,urls\n"
    "Rotate keys,Every month,strategy;tool,domain=ops; owner=sre,team:a,4,https://wiki.example/keys\n"
    ",missing task,tool,,team:a,,\n"
    "Bad score,x,tool,,team:a,9,\n"
    "Restart the queue,Drain first,tool,,,,\n"
)


def test_a_csv_imports_its_good_rows_reports_the_bad_ones_by_line_and_is_idempotent():
    report = import_file(IMPORTER, name="tips.csv", data=CSV.encode(), scopes=["team:ops"])
    assert report.imported == 2 and [f["line"] for f in report.failed] == [3, 4]
    assert report.failed[0]["reason"].startswith("task:") and "score" in report.failed[1]["reason"]
    keys = Knowledge.objects.get(task="Rotate keys")
    assert (keys.types, keys.tags, keys.scopes, keys.score) == (["strategy", "tool"], {"domain": "ops", "owner": "sre"},
                                                                 ["team:a"], 4)
    assert keys.source["urls"] == ["https://wiki.example/keys"] and keys.source["document"]["uri"] == "tips.csv"
    assert Knowledge.objects.get(task="Restart the queue").scopes == ["team:ops"]
    again = import_file(IMPORTER, name="tips.csv", data=CSV.encode(), scopes=["team:ops"])
    assert (again.imported, again.skipped) == (0, 2) and Knowledge.objects.count() == 2


def test_a_csv_reads_the_rows_stored_before_from_it_once_per_scopes_not_once_per_row():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from ingest.importer import CSV_BATCH

    rows = "".join(f"Step {n},Do thing {n},tool,,{'team:a' if n % 2 else ''},,\n" for n in range(CSV_BATCH + 100))
    data = ("task,content,types,tags,scopes,score,urls\n" + rows).encode()
    import_file(IMPORTER, name="steps.csv", data=data[: data.index(b"Step 40,")], scopes=["team:ops"])  # 40 before
    with CaptureQueriesContext(connection) as queries:
        report = import_file(IMPORTER, name="steps.csv", data=data, scopes=["team:ops"])
    assert (report.imported, report.skipped, report.failed) == (CSV_BATCH + 60, 40, [])
    earlier_rows = [q["sql"] for q in queries if "content_hash" in q["sql"] and q["sql"].startswith("SELECT")]
    # one read per scopes of the file (2), then one per scopes of each batch under its lock (2 batches x 2)
    assert len(earlier_rows) == 2 + 2 * 2


def test_a_csv_row_whose_tags_nest_past_the_recursion_limit_is_reported_and_the_rest_imported():
    deep = '{""a"": ' + "[" * 5000 + "]" * 5000 + "}"
    data = f'task,content,types,tags\nDeep tags,x,tool,"{deep}"\nPlain row,y,tool,domain=ops\n'.encode()

    report = import_file(IMPORTER, name="deep.csv", data=data, scopes=["team:ops"])

    assert report.imported == 1 and [f["line"] for f in report.failed] == [2]
    assert report.failed[0]["reason"].endswith("tags: the JSON object nests too deep")
    assert list(Knowledge.objects.values_list("task", flat=True)) == ["Plain row"]


RUNBOOK = "# Deploy\n\nBuild the image first.\n\n## Rollback\n\nRedeploy the previous tag.\n"
PREFERENCES = "# 偏好\n\n## 代码风格\n\n用制表符缩进。\n"


def test_a_markdown_folder_and_a_zip_become_items_titled_by_their_headings_and_reimport_as_no_change(tmp_path):
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "deploy.md").write_text(RUNBOOK)
    (tmp_path / "prefs.md").write_text(PREFERENCES)
    (tmp_path / "notes.txt").write_text("not markdown")
    report = import_path(IMPORTER, tmp_path, scopes=["team:a"], types=["strategy"])
    assert (report.imported, report.failed) == (2, [])
    tasks = set(Knowledge.objects.values_list("task", flat=True))
    assert {"Deploy", "Deploy > Rollback", "偏好 > 代码风格"} <= tasks
    rollback = Knowledge.objects.get(task="Deploy > Rollback")
    assert rollback.source["document"]["uri"] == "ops/deploy.md" and rollback.types == ["strategy"]
    assert import_path(IMPORTER, tmp_path, scopes=["team:a"]).skipped == 2
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("handbook/deploy.md", RUNBOOK)
    zipped = import_file(IMPORTER, name="handbook.zip", data=archive.getvalue(), scopes=["team:b"])
    assert zipped.imported == 1 and Knowledge.objects.filter(scopes=["team:b"]).count() == 2


def test_the_commands_export_to_a_file_and_import_it_back(tmp_path, capsys):
    world()
    target = tmp_path / "all.jsonl"
    call_command("export", "--output", str(target))
    exported = target.read_text().splitlines()
    assert json.loads(exported[0])["counts"] == {"resources": 2, "knowledge": 5}
    call_command("import", str(target), "--json")
    report = json.loads(capsys.readouterr().out)
    assert report["skipped"] == len(exported) - 2 and report["failed"] == []  # all but the header and the end
    call_command("export", "--output", str(target), "--no-vectors")
    without = [json.loads(line) for line in target.read_text().splitlines()]
    assert without[0]["vectors"] is False and not any(r.get("embedding") for r in without)


def test_the_api_streams_an_export_of_the_tokens_scopes_and_imports_only_for_curators():
    ids = world()
    agent = agent_client("reader", ["team:a"])
    reply = agent.get("/api/export")
    assert reply.status_code == 200 and reply["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in b"".join(reply.streaming_content).decode().splitlines()]
    assert ids["other"] not in {r.get("id") for r in lines} and lines[0]["secrets"] == {"mode": "omitted"}
    assert lines[0]["vectors"] is True and lines[2]["embedding"]
    without = agent.get("/api/export", {"vectors": "false"})
    lines = [json.loads(line) for line in b"".join(without.streaming_content).decode().splitlines()]
    assert lines[0]["vectors"] is False and not any(r.get("embedding") for r in lines)
    for query in ({"vectors": "no"}, {"vectors": ["false", "true"]}):
        refused = agent.get("/api/export", query)
        assert refused.status_code == 400 and list(refused.json()["error"]["fields"]) == ["vectors"], refused.content
    refused = agent.post("/api/import", {"content": CSV, "filename": "tips.csv", "scopes": ["team:a"]}, format="json")
    assert refused.status_code == 403
    curator = agent_client("curator", ["team:a"], writable_scopes=["team:a"], can_curate=True)
    upload = io.BytesIO(CSV.encode())
    upload.name = "tips.csv"
    queued = curator.post("/api/import", {"file": upload, "scopes": "team:a"}, format="multipart")
    assert queued.status_code == 202, queued.content
    import_run(job_id=queued.json()["job"]["id"], worker="test/1/a")  # what the worker does
    report = curator.get(queued.json()["job"]["url"]).json()["result"]
    assert report["imported"] == 2 and [f["line"] for f in report["failed"]] == [3, 4]
    missing = curator.post("/api/import", {"scopes": ["team:a"]}, format="json")
    assert missing.status_code == 400 and "file" in missing.json()["error"]["fields"]


@pytest.mark.django_db(transaction=True)
def test_under_asgi_the_export_streams_in_chunks_read_in_djangos_thread():
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    from tests.callers import agent_key

    key = agent_key("reader", ["team:a"])
    services.knowledge_create(acting("agent:ops"), task="Streamed", content="over ASGI", types=["tool"], scopes=["team:a"])

    async def fetch():
        response = await AsyncClient().get("/api/export", headers={"Authorization": f"Bearer {key}"})
        assert response.is_async  # not gathered into memory by Django first
        return [chunk async for chunk in response.streaming_content]

    chunks = async_to_sync(fetch)()
    lines = [json.loads(line) for line in b"".join(chunks).decode().splitlines()]
    assert lines[0]["kind"] == "knowhub-export" and lines[1]["task"] == "Streamed"


def test_a_zip_bomb_is_refused_before_anything_is_unpacked():
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("huge.md", b"#" * (64 * 1024 * 1024))  # 64 MB of one byte packs into ~64 kB
    with pytest.raises(ImportRefused, match="zip bomb"):
        import_file(IMPORTER, name="bomb.zip", data=bomb.getvalue(), scopes=["team:a"])


def test_an_import_cannot_rewrite_an_item_the_caller_may_only_read():
    ids = world()
    text = export_text()
    lines = [json.dumps({**r, "content": "rewritten by an outsider"}) if r.get("id") == ids["a"] else json.dumps(r)
             for r in map(json.loads, text.splitlines())]
    reader_of_a = Caller(principal="agent:curator_b", agent_id="curator_b", readable_scopes=("team:a", "team:b"),
                         writable_scopes=("team:b",), curates=True, edits_any=True)
    report = import_file(reader_of_a, name="x.jsonl", data="\n".join(lines).encode())
    assert any(f["line"] for f in report.failed if "may not write" in f["reason"])
    assert Knowledge.objects.get(pk=ids["a"]).content == "Use the shared account; 3 tries max"


def test_an_item_id_taken_where_the_caller_cannot_read_is_refused_saying_only_that_it_is_taken():
    """As a resource id is: the report tells an importer neither the item's scope nor anything else about it."""
    ids = world()
    text = export_text()
    lines = [json.dumps({**r, "scopes": ["team:a"], "content": "planted"}) if r.get("id") == ids["other"] else json.dumps(r)
             for r in map(json.loads, text.splitlines())]
    team_a = Caller(principal="agent:cur_a", agent_id="cur_a", readable_scopes=("team:a",), writable_scopes=("team:a",),
                    curates=True, edits_any=True)
    report = import_file(team_a, name="x.jsonl", data="\n".join(lines).encode())
    refusals = [f["reason"] for f in report.failed if ids["other"] in f["reason"]]
    assert refusals == [f"id: the knowledge id {ids['other']} is taken"], report.failed
    assert Knowledge.objects.get(pk=ids["other"]).content == "Secret plans of team b"


def test_sealing_secrets_under_a_passphrase_is_recorded_as_a_reveal_and_skips_expired_ones_for_agents():
    from datetime import timedelta

    from django.utils import timezone

    world()
    agent = Caller(principal="agent:ops", agent_id="ops", readable_scopes=("team:a",), writable_scopes=("team:a",),
                   can_read_secrets=True)
    current = [json.loads(line) for line in export_text(agent, passphrase="correct horse battery").splitlines()]
    site = next(r for r in current if r.get("id") == "credentials/site")
    assert site["secure_body"] and RevealEvent.objects.filter(principal="agent:ops", version=None).exists()
    assert site["versions"][0]["secure_body"] == ""  # an agent reveals the current secret only
    Resource.objects.filter(pk="credentials/site").update(expires_at=timezone.now() - timedelta(days=1))
    sealed = [json.loads(line) for line in export_text(agent, passphrase="correct horse battery").splitlines()]
    assert next(r for r in sealed if r.get("id") == "credentials/site")["secure_body"] == ""  # expired: never revealed
    operator = [json.loads(line) for line in export_text(passphrase="correct horse battery").splitlines()]
    site = next(r for r in operator if r.get("id") == "credentials/site")
    assert site["secure_body"] and site["versions"][0]["secure_body"]  # the operator's backup: everything


@pytest.mark.parametrize("passphrase", [None, "correct horse battery"])
def test_no_export_hands_an_agent_a_secret_its_reveal_would_refuse(passphrase):
    """The installation's ciphertext is a secret too: imported under a new id, it would be revealed as that
    resource's. So an expired secret and an earlier version's are left out for an agent in either mode."""
    from datetime import timedelta

    from django.utils import timezone

    world()
    resource_create(acting("agent:ops"), resource_id="cookie/expired", title="cookie", scopes=["team:a"],
                    secure_body="EXPIRED-COOKIE", content_type="cookie")
    Resource.objects.filter(pk="cookie/expired").update(expires_at=timezone.now() - timedelta(days=1))
    curator = Caller(principal="agent:cur", agent_id="cur", readable_scopes=("team:a",), writable_scopes=("team:a",),
                     can_read_secrets=True, curates=True)

    out = {r.get("id"): r for r in map(json.loads, export_text(curator, passphrase=passphrase).splitlines())}

    assert out["cookie/expired"]["secure_body"] == ""
    assert out["credentials/site"]["secure_body"] and out["credentials/site"]["versions"][0]["secure_body"] == ""
    person = Caller(principal="user:ada", agent_id="ada", readable_scopes=None, writable_scopes=None,
                    can_read_secrets=True)
    by_person = {r.get("id"): r for r in map(json.loads, export_text(person, passphrase=passphrase).splitlines())}
    assert by_person["cookie/expired"]["secure_body"] == ""  # expired: for a person too
    assert by_person["credentials/site"]["versions"][0]["secure_body"]  # an admin reveals earlier versions


def test_a_header_asking_for_other_key_parameters_or_a_short_passphrase_is_a_400_naming_the_passphrase():
    world()
    text = export_text(passphrase="correct horse battery")
    header, rest = text.split("\n", 1)
    greedy = json.loads(header)
    greedy["secrets"]["n"] = 2**24  # 16 GiB of scrypt memory if obeyed
    wipe()
    with pytest.raises(DomainError) as refused:
        import_file(IMPORTER, name="x.jsonl", data=(json.dumps(greedy) + "\n" + rest).encode(), passphrase="correct horse battery")
    assert refused.value.field == "passphrase"
    with pytest.raises(DomainError, match="at least 8"):
        list(export_records(OPERATOR, passphrase="short"))


def test_hostile_lines_are_reported_and_the_rest_lands_exactly():
    world()
    text = export_text()
    wipe()
    lines = text.split("\n")
    lines.insert(1, "[" * 100_000 + "]" * 100_000)
    item = next(json.loads(line) for line in lines if '"kind": "knowledge"' in line)
    lines.insert(len(lines) - 2, json.dumps({**item, "id": "knowledge-20260101-sep1",
                                             "content": "one\u2028two\u2029three\x85four"}, ensure_ascii=False))
    report = import_file(IMPORTER, name="x.jsonl", data="\n".join(lines).encode())
    assert [f["line"] for f in report.failed] == [2] and "nested too deeply" in report.failed[0]["reason"]
    assert Knowledge.objects.get(pk="knowledge-20260101-sep1").content == "one\u2028two\u2029three\x85four"


@pytest.mark.parametrize("case, field", [
    ({"kind": "useful", "case": {"outcome": "ok"}}, "feedback.1.kind"),
    ({"case": {"outcome": "ok"}}, "feedback.1.kind"),
    ("helpful", "feedback.1.non_field_errors"),
    ({"kind": "helpful", "case": ["not", "an", "object"]}, "feedback.1.case"),
    ({"kind": "helpful", "case": {f"k{n}": n for n in range(30)}}, "feedback.1.case"),
    ({"kind": "helpful", "case": {"outcome": "x" * 30_000}}, "feedback.1.case"),
    ({"kind": "helpful", "case": {"reported_by": "x" * 5_000}}, "feedback.1.case"),
    ({"kind": "helpful", "reported_by": "x" * 201}, "feedback.1.reported_by"),
    ({"kind": "helpful", "created_at": "yesterday"}, "feedback.1.created_at"),
])
def test_an_exported_feedback_case_out_of_shape_is_reported_by_its_field_and_its_item_not_half_stored(case, field):
    ids = world()
    lines = [json.loads(line) for line in export_text().splitlines()]
    wipe()
    item = next(r for r in lines if r.get("id") == ids["a"])
    item["feedback"] = [item["feedback"][0], case]
    report = import_file(IMPORTER, name="x.jsonl", data="\n".join(map(json.dumps, lines)).encode())
    [failure] = [f for f in report.failed if field in f["reason"]]
    assert failure["line"] == lines.index(item) + 1, report.failed
    assert not Knowledge.objects.filter(pk=ids["a"]).exists() and not FeedbackCase.objects.filter(knowledge_id=ids["a"]).exists()


def test_exported_cases_as_the_hub_stores_them_import_with_their_reporter_and_time():
    """A stored case holds the reporter and time the hub added to what was sent: the import keeps both."""
    ids = world()
    lines = [json.loads(line) for line in export_text().splitlines()]
    wipe()
    item = next(r for r in lines if r.get("id") == ids["a"])
    item["feedback"][0]["case"].update({f"k{n}": n for n in range(19)})  # 20 keys sent, 22 stored
    report = import_file(IMPORTER, name="x.jsonl", data="\n".join(map(json.dumps, lines)).encode())
    assert not report.failed, report.failed
    stored = FeedbackCase.objects.filter(knowledge_id=ids["a"]).order_by("id")
    assert [c.case for c in stored] == [c["case"] for c in item["feedback"]]
    assert stored[0].reported_by == "agent:tester" and {"timestamp", "reported_by"} <= set(stored[0].case)


def test_links_to_items_outside_the_import_are_reported_and_everything_else_lands():
    ids = world()
    team_a = Caller(principal="agent:a", agent_id="a", readable_scopes=("team:a",), writable_scopes=("team:a",))
    lines = [json.loads(line) for line in export_text(team_a).splitlines()]
    wipe()
    without_target = [r for r in lines if r.get("id") != ids["merged"]]  # the merged item is not in this file
    report = import_file(IMPORTER, name="x.jsonl", data="\n".join(map(json.dumps, without_target)).encode())
    reasons = " ".join(f["reason"] for f in report.failed)
    assert "merged_into" in reasons and "not in this hub" in reasons
    assert set(Knowledge.objects.filter(pk__in=ids["originals"]).values_list("status", flat=True)) == {"active"}
    assert Knowledge.objects.get(pk=ids["a"]).versions.count() == 1


def test_an_export_cut_short_imports_what_it_holds_and_says_it_was_cut():
    world()
    lines = export_text().splitlines()
    wipe()
    report = import_file(IMPORTER, name="x.jsonl", data="\n".join(lines[:-3]).encode())
    assert report.failed[-1]["line"] is None and "cut short" in report.failed[-1]["reason"]
    assert report.imported > 0


@pytest.mark.django_db(transaction=True)
def test_a_long_export_is_stored_in_batches_whose_embeddings_are_queued_32_to_a_message(monkeypatch):
    from ingest.importer import JSONL_BATCH
    from knowledge.search.indexing import EMBED_BATCH

    sent = []
    monkeypatch.setattr("knowledge.tasks.embed_knowledge.delay", lambda ids: sent.append(list(ids)))
    items = [_item(f"knowledge-20260101-{n:04x}") for n in range(JSONL_BATCH + 50)]
    items[7]["score"] = 9  # one bad record in the first batch fails alone
    report = import_file(IMPORTER, name="many.jsonl", data=_export_of(*items))
    assert report.imported == len(items) - 1 and [f["line"] for f in report.failed] == [9]
    assert "score" in report.failed[0]["reason"]
    stored = set(Knowledge.objects.values_list("id", flat=True))
    assert stored == {i["id"] for i in items} - {items[7]["id"]}
    # a message per EMBED_BATCH of each batch (not one per record); every stored item asked for once
    first, second = JSONL_BATCH - 1, 50
    assert [len(ids) for ids in sent] == [*_sizes(first, EMBED_BATCH), *_sizes(second, EMBED_BATCH)]
    assert sorted(i for ids in sent for i in ids) == sorted(stored)


def _sizes(count: int, per: int) -> list[int]:
    return [min(per, count - start) for start in range(0, count, per)]


@pytest.mark.django_db(transaction=True)
def test_two_exports_holding_the_same_ids_in_opposite_orders_imported_at_once_both_finish(monkeypatch):
    """Each import's batch holds the first id it stored while it waits for the other's: PostgreSQL ends the deadlock
    by failing one batch, which is stored again one record per transaction (and finds the other's items)."""
    import threading

    from django.db import connections

    from ingest import importer

    x, y = _item("knowledge-20260101-aaaa"), _item("knowledge-20260101-bbbb")
    both_hold_one, local, store = threading.Barrier(2, timeout=20), threading.local(), importer._knowledge

    def knowledge(*args, **kwargs):
        outcome = store(*args, **kwargs)
        if not getattr(local, "waited", False):
            local.waited = True
            both_hold_one.wait()
        return outcome

    monkeypatch.setattr(importer, "_knowledge", knowledge)
    reports, errors = {}, []

    def run(name, data):
        try:
            reports[name] = import_file(IMPORTER, name=f"{name}.jsonl", data=data)
        except Exception as exc:  # noqa: BLE001 - the assertion below names it
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=("xy", _export_of(x, y))),
               threading.Thread(target=run, args=("yx", _export_of(y, x)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert all(r.failed == [] for r in reports.values())
    assert sorted((r.imported, r.skipped) for r in reports.values()) == [(0, 2), (2, 0)]
    assert Knowledge.objects.filter(pk__in=[x["id"], y["id"]]).count() == 2


def test_a_csv_read_by_one_team_is_imported_again_by_another():
    first = import_file(IMPORTER, name="tips.csv", data=CSV.encode(), scopes=["team:ops"])
    other = import_file(IMPORTER, name="tips.csv", data=CSV.replace(",team:a,", ",,").encode(), scopes=["team:dev"])
    assert first.imported == 2 and other.imported >= 1 and other.skipped == 0


@pytest.mark.django_db(transaction=True)
def test_the_same_csv_imported_by_several_callers_at_once_stores_each_row_once():
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    rows = "".join(f"Step {n},Do thing {n} then check it,tool,,team:a,,\n" for n in range(30))
    data = ("task,content,types,tags,scopes,score,urls\n" + rows).encode()

    def run(_):
        try:
            return import_file(IMPORTER, name="steps.csv", data=data, scopes=["team:ops"])
        finally:
            connections.close_all()

    with ThreadPoolExecutor(4) as pool:
        reports = list(pool.map(run, range(4)))
    assert sum(r.imported for r in reports) == 30 and sum(r.skipped for r in reports) == 90
    assert Knowledge.objects.filter(source__document__uri="steps.csv").count() == 30


# --- links restored only as the API's operations would make them ------------------------------------------------

def _export_of(*records) -> bytes:
    from ingest.export import FORMAT, VERSION

    lines = [{"kind": FORMAT, "version": VERSION}, *records, {"kind": "end"}]
    return "".join(json.dumps(r) + "\n" for r in lines).encode()


def _item(item_id: str, scopes=("team:a",), **fields) -> dict:
    return {"kind": "knowledge", "id": item_id, "task": f"Task of {item_id}", "content": "Some advice.",
            "types": ["tool"], "scopes": list(scopes), **fields}


# reads a, b and c; writes (and curates) a and c only
CURATOR_OF_A_AND_C = Caller(principal="agent:cur", agent_id="cur", readable_scopes=("team:a", "team:b", "team:c"),
                            writable_scopes=("team:a", "team:c"), edits_any=True, curates=True)
NEW = "knowledge-20260101-new1"
REFUSED_LINKS = [
    # (the record's scopes, status and link; the start of the reason after the link's name)
    (["team:a"], "superseded", NEW, "an item cannot supersede itself"),
    (["team:a"], "superseded", "B", "this caller may not write to any scope of"),  # B: team:b, read, not written
    (["team:a", "team:c"], "superseded", "A", "{target} is not in team:c, where"),  # a successor read where it is
    (["team:a"], "merged", "B", "this caller may not write to any scope of"),
    (["team:a"], "merged", "AC", "the items are in different scopes"),
    (["team:a"], "merged", NEW, "an item cannot be merged into itself"),
]


@pytest.mark.parametrize("scopes, status, target, reason", REFUSED_LINKS,
                         ids=["supersede-itself", "supersede-unwritable", "supersede-unread-where-read",
                              "merge-unwritable", "merge-other-scopes", "merge-itself"])
def test_a_link_the_apis_supersede_or_merge_would_refuse_is_not_restored_and_the_item_stays_active(
        scopes, status, target, reason):
    writer = acting("agent:ops")
    stored = {"A": services.knowledge_create(writer, task="A", content="a", types=["tool"], scopes=["team:a"]).id,
              "B": services.knowledge_create(writer, task="B", content="b", types=["tool"], scopes=["team:b"]).id,
              "AC": services.knowledge_create(writer, task="AC", content="ac", types=["tool"],
                                              scopes=["team:a", "team:c"]).id}
    target = stored.get(target, target)
    field = "superseded_by" if status == "superseded" else "merged_into"

    report = import_file(CURATOR_OF_A_AND_C, name="x.jsonl",
                         data=_export_of(_item(NEW, scopes, status=status, **{field: target})))

    assert report.imported == 1
    [failure] = report.failed
    assert failure["line"] == NEW and failure["reason"].startswith(f"{field}: {reason.format(target=target)}"), failure
    assert failure["reason"].endswith("the item stays active")
    restored = Knowledge.objects.get(pk=NEW)
    assert (restored.status, restored.superseded_by_id, restored.merged_into_id) == ("active", None, None)


def test_links_that_would_go_round_in_a_circle_are_not_restored():
    first, second = "knowledge-20260101-cir1", "knowledge-20260101-cir2"
    report = import_file(CURATOR_OF_A_AND_C, name="x.jsonl", data=_export_of(
        _item(first, status="superseded", superseded_by=second),
        _item(second, status="superseded", superseded_by=first),
        _item("knowledge-20260101-cir3", status="merged", merged_into="knowledge-20260101-cir4"),
        _item("knowledge-20260101-cir4", status="merged", merged_into="knowledge-20260101-cir3")))

    assert [f["line"] for f in report.failed] == [second, "knowledge-20260101-cir4"]
    assert all("circle" in f["reason"] for f in report.failed)
    statuses = dict(Knowledge.objects.values_list("id", "status"))
    assert statuses == {first: "superseded", second: "active", "knowledge-20260101-cir3": "merged",
                        "knowledge-20260101-cir4": "active"}


def test_a_chain_of_supersedes_comes_back_whatever_the_order_of_its_records():
    """The successor's status is not held to "active" on restore: the link was made when it was, and a successor
    superseded since (a chain) comes back as it was, in any order of the file."""
    older, middle, newest = "knowledge-20260101-old1", "knowledge-20260101-mid1", "knowledge-20260101-new2"
    report = import_file(CURATOR_OF_A_AND_C, name="x.jsonl", data=_export_of(
        _item(middle, status="superseded", superseded_by=newest),
        _item(older, status="superseded", superseded_by=middle),
        _item(newest)))

    assert report.failed == [] and report.imported == 3
    links = dict(Knowledge.objects.values_list("id", "superseded_by_id"))
    assert links == {older: middle, middle: newest, newest: None}


# --- a wrong passphrase refuses the file as a whole ---------------------------------------------------------------

@pytest.mark.parametrize("header", ["with its key check", "written before the key check"])
def test_a_wrong_passphrase_refuses_the_whole_export_and_nothing_is_stored(header):
    from ingest.passphrase import WrongPassphrase

    world()
    text = export_text(passphrase="correct horse battery")
    lines = [json.loads(line) for line in text.splitlines()]
    assert "check" in lines[0]["secrets"]
    if header == "written before the key check":
        del lines[0]["secrets"]["check"]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    wipe()

    with pytest.raises(WrongPassphrase) as refused:
        import_file(IMPORTER, name="move.jsonl", data=data, passphrase="the wrong passphrase")
    assert refused.value.field == "passphrase" and "does not open" in refused.value.message
    assert not Knowledge.objects.exists() and not Resource.objects.exists()

    report = import_file(IMPORTER, name="move.jsonl", data=data, passphrase="correct horse battery")
    assert report.failed == [] and Resource.objects.get(pk="credentials/site").secure_body == "pw-2"


def test_a_sealed_export_holding_no_secret_and_no_key_check_imports_with_any_passphrase():
    """Nothing in it to open, nothing to refuse: what it holds needs no secret."""
    services.knowledge_create(acting("agent:ops"), task="Plain", content="no secret", types=["tool"], scopes=["team:a"])
    lines = [json.loads(line) for line in export_text(passphrase="correct horse battery").splitlines()]
    del lines[0]["secrets"]["check"]
    wipe()

    report = import_file(IMPORTER, name="move.jsonl", data="\n".join(map(json.dumps, lines)).encode(),
                         passphrase="any other passphrase")
    assert report.failed == [] and report.imported == 1


# --- GET /api/export takes the parameters it knows ---------------------------------------------------------------

@pytest.mark.parametrize("query, field, said", [
    ("scope=team:b", "scope", "unknown field; expected one of scopes"),
    ("bogus=1&scopes=team:a", "bogus", "unknown field"),
    ("passphrase=correct+horse+battery", "passphrase", "goes in the X-KnowHub-Passphrase header"),
    ("format=json&format=json", "format", "given more than once"),
])
def test_the_export_refuses_a_query_parameter_it_does_not_know_naming_it(query, field, said):
    world()
    reply = agent_client("reader", ["team:a", "team:b"], can_read_secrets=True).get(f"/api/export?{query}")

    assert reply.status_code == 400, reply.status_code
    error = reply.json()["error"]
    assert error["message"] == f"{field}: {error['fields'][field][0]}" and said in error["fields"][field][0]


def test_the_export_takes_scopes_repeated_or_comma_separated():
    ids = world()
    agent = agent_client("reader", ["team:a", "team:b"])
    for query in ("scopes=team:b", "scopes=team:a&scopes=team:b", "scopes=team:a,team:b&format=json"):
        reply = agent.get(f"/api/export?{query}")
        assert reply.status_code == 200, (query, reply.status_code)
        exported = {json.loads(line).get("id") for line in b"".join(reply.streaming_content).decode().splitlines()}
        assert ids["other"] in exported and (ids["a"] in exported) == ("team:a" in query)
