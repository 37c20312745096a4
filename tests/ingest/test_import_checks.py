"""An import stores nothing the API would refuse: each record held to the API's rules for the same values, a refused
one reported by its line and field while the rest are imported; and what a report says when PostgreSQL refuses one,
or when the same file is imported twice at once."""
import json
import threading
import time

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections, transaction

from agents.caller import Caller
from ingest.export import FORMAT, VERSION
from ingest.importer import ImportRefused, import_file, import_path
from knowledge import services
from knowledge.limits import CONTENT_MAX, TASK_MAX
from knowledge.models import Knowledge
from resources.models import Resource
from tests.callers import agent_client
from tests.factories import make_knowledge

IMPORTER = Caller.system("command:import")
ITEM_ID = "knowledge-20250101-abcd"


def export_of(*records) -> bytes:
    lines = [{"kind": FORMAT, "version": VERSION}, *records, {"kind": "end"}]
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines).encode()


def item(**fields) -> dict:
    return {"kind": "knowledge", "id": ITEM_ID, "task": "Rotate the keys", "content": "Monthly; revoke the old one.",
            "types": ["strategy"], "scopes": ["org:acme"], "owner": "agent:ops",
            "source": {"name": "runbook", "urls": ["https://wiki.example/keys"]}, **fields}


def resource(**fields) -> dict:
    return {"kind": "resource", "id": "code/rotate", "title": "rotate.sh", "body": "echo rotate", "content_type": "code",
            "metadata": {}, "scopes": ["org:acme"], **fields}


GOOD_ITEM = item(id="knowledge-20250101-good", task="A good one")
GOOD_RESOURCE = resource(id="code/good", title="good")

REFUSED = [
    # (the record, the start of its reason: the field, then the API's own words)
    (item(id="knowledge-XYZ"), "id: must look like knowledge-YYYYMMDD-xxxx"),
    (item(scopes=["acme"]), "scopes: scopes look like kind:name"),
    (item(scopes=[]), "scopes: "),
    (item(source={"urls": ["javascript:alert(document.cookie)"]}), "source.urls.0: must be an http:// or https:// URL"),
    (item(source={"urls": ["https://ok.example", "data:text/html,<b>x</b>"]}), "source.urls.1: must be an http"),
    (item(content="c" * (CONTENT_MAX + 1)), "content: "),
    (item(task="t" * (TASK_MAX + 1)), "task: "),
    (item(owner="o" * 201), "owner: "),
    (item(source={"name": "run\x00book"}), "source.name: contains a NUL character"),
    (item(feedback=[{"kind": "helpful", "case": {"note": "fine\x00"}}]), "feedback.0.case.note: contains a NUL character"),
    (resource(scopes=["acme"]), "scopes.0: "),
    (resource(scopes=[]), "scopes: "),
    (resource(title="t" * 301), "title: "),
    (resource(body="b" * 1_000_001), "body: "),
    (resource(id="../etc/passwd"), "id: must be path-like"),
    (resource(metadata=["not", "an", "object"]), "metadata: "),
    (resource(body="echo \x00"), "body: contains a NUL character"),
]


@pytest.mark.django_db
@pytest.mark.parametrize("record, reason", REFUSED, ids=[f"{r['kind']}-{reason.split(':')[0]}-{n}"
                                                        for n, (r, reason) in enumerate(REFUSED)])
def test_a_record_the_api_would_refuse_is_reported_by_line_and_field_and_the_rest_is_imported(record, reason):
    report = import_file(IMPORTER, name="backup.jsonl", data=export_of(GOOD_RESOURCE, record, GOOD_ITEM))

    assert [f["line"] for f in report.failed] == [3], report.failed
    assert report.failed[0]["reason"].startswith(reason), report.failed
    assert report.imported == 2
    assert Knowledge.objects.filter(pk=GOOD_ITEM["id"]).exists() and Resource.objects.filter(pk="code/good").exists()
    assert not Knowledge.objects.filter(task=record.get("task", "-")).exclude(pk=GOOD_ITEM["id"]).exists()
    assert not Resource.objects.filter(pk=record["id"]).exists()


@pytest.mark.django_db
def test_control_characters_are_imported_as_the_api_takes_them():
    """The API refuses NUL (its parser) and takes the other C0 characters in text: an import does the same."""
    text = "columns\tsplit by\x1f unit separators\x01"
    response = agent_client("ops", ["org:acme"]).post(
        "/api/knowledge", {"task": "Parse the feed", "content": text, "types": ["tool"]}, format="json")
    assert response.status_code == 201, response.content

    report = import_file(IMPORTER, name="backup.jsonl", data=export_of(resource(title="feed\x01parser"), item(content=text)))

    assert report.failed == [] and report.imported == 2
    assert Knowledge.objects.get(pk=ITEM_ID).content == text
    assert Resource.objects.get(pk="code/rotate").title == "feed\x01parser"


@pytest.mark.django_db
def test_an_export_keeps_what_the_hub_itself_stored_past_a_saves_limits():
    """A document's title becomes its items' `source.name` (a save takes 500 characters) and a merge keeps every
    URL of its items (a save takes 100): the hub wrote them, its export holds them, and an import keeps them."""
    from ingest.export import export_records

    long_title = "Runbook " + "x" * 600
    urls = [f"https://wiki.example/{n}" for n in range(150)]
    kept = services.knowledge_create(IMPORTER, task="Read the runbook", content="Step one.", types=["tool"],
                                     scopes=["org:acme"], source={"name": long_title, "category": "document",
                                                                  "urls": urls, "document": {"kind": "markdown"}})
    records = list(export_records(IMPORTER, embedding_model="none"))
    Knowledge.objects.filter(pk=kept.pk).delete()

    report = import_file(IMPORTER, name="backup.jsonl", data=export_of(*records[1:-1]))

    assert report.failed == [] and report.imported == 1
    restored = Knowledge.objects.get(pk=kept.pk)
    assert (restored.source["name"], restored.source["urls"]) == (long_title, urls)


@pytest.mark.django_db
@pytest.mark.parametrize("name, data", [
    ("tips.csv", b"task,content,types\nRotate the keys,Monthly,strategy\n"),
    ("notes.md", b"# Rotate the keys\n\nMonthly; revoke the old key a day later.\n"),
    ("backup.jsonl", export_of(GOOD_ITEM)),
])
def test_the_scopes_an_import_is_given_are_held_to_the_import_operations_rule(name, data):
    with pytest.raises(ImportRefused) as refused:
        import_file(IMPORTER, name=name, data=data, scopes=["acme"])
    assert refused.value.field == "scopes" and "kind:name" in refused.value.message
    assert not Knowledge.objects.exists()


@pytest.mark.django_db
def test_the_import_command_refuses_scopes_of_a_bad_shape_for_a_folder_and_a_file(tmp_path):
    (tmp_path / "deploy.md").write_text("# Deploy\n\nRoll out one zone at a time.\n")
    (tmp_path / "tips.csv").write_text("task,content,types\nRotate the keys,Monthly,strategy\n")
    for path in (tmp_path, tmp_path / "tips.csv"):
        with pytest.raises(CommandError, match="scopes: scopes look like kind:name"):
            call_command("import", str(path), "--scopes", "team a")
    with pytest.raises(ImportRefused):
        import_path(IMPORTER, tmp_path, scopes=["org:acme", "bad scope"])
    assert not Knowledge.objects.exists()


@pytest.mark.django_db
def test_a_csv_row_keeps_the_apis_rules_for_links_and_control_characters_naming_the_column():
    rows = ("task,content,types,urls\n"
            "Open the wiki,Read it,tool,javascript:alert(1)\n"
            "Parse the feed,split\x1fon unit separators,tool,https://wiki.example/feed\n")
    report = import_file(IMPORTER, name="tips.csv", data=rows.encode(), scopes=["org:acme"])
    assert report.failed == [{"line": 2, "reason": "urls.0: must be an http:// or https:// URL"}]
    assert report.imported == 1 and Knowledge.objects.get().content == "split\x1fon unit separators"


@pytest.mark.django_db
def test_a_csv_cell_that_is_no_number_is_named_by_its_column_with_the_apis_words():
    rows = ("task,content,types,score,confidence\n"
            "Rotate the keys,Monthly,strategy,four,\n"
            "Revoke the old key,A day later,strategy,4,most\n"
            "Audit the keys,Yearly,strategy,4,0.8\n")
    report = import_file(IMPORTER, name="keys.csv", data=rows.encode(), scopes=["org:acme"])
    assert report.failed == [{"line": 2, "reason": "score: A valid integer is required."},
                             {"line": 3, "reason": "confidence: A valid number is required."}]
    assert (report.imported, Knowledge.objects.get().score, Knowledge.objects.get().confidence) == (1, 4, 0.8)


@pytest.mark.django_db
def test_what_the_database_refuses_is_reported_in_its_words_naming_the_column():
    """A value no check of the importer's covers (a resource's owner is the hub's: no request gives one)."""
    report = import_file(IMPORTER, name="backup.jsonl", data=export_of(resource(owner="o" * 300), GOOD_ITEM))
    [failure] = report.failed
    assert failure["line"] == 2
    assert failure["reason"].startswith("the database refused this record: ") and "too long" in failure["reason"]
    assert report.imported == 1


@pytest.mark.django_db
def test_a_key_the_record_holds_twice_is_named_with_what_already_exists():
    versions = [{"number": 1, "task": "old", "content": "old"}, {"number": 1, "task": "older", "content": "older"}]
    report = import_file(IMPORTER, name="backup.jsonl", data=export_of(item(versions=versions), GOOD_ITEM))
    [failure] = report.failed
    assert failure["line"] == 2 and failure["reason"].startswith(
        "the database refused this record: knowledge_version_number_unique: ")
    assert "already exists" in failure["reason"] and report.imported == 1
    assert not Knowledge.objects.filter(pk=ITEM_ID).exists()


@pytest.mark.django_db
def test_a_missing_field_is_named():
    record = {"kind": "slim_rejection", "second": make_knowledge().id}
    report = import_file(IMPORTER, name="backup.jsonl", data=export_of(record))
    assert report.failed == [{"line": 2, "reason": "first: This field is required."}]


# --- the same file imported twice at once -------------------------------------------------------------------

def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")
        return cursor.fetchone()[0] > 0


def _import_twice_at_once(data: bytes) -> tuple:
    """Two imports of `data`, each in one transaction (as a request's), on connections of their own: the first
    holds its rows uncommitted until the second waits on them, so the second looked before the first stored them."""
    reports, errors, release = {}, [], threading.Event()

    def run(name):
        try:
            with transaction.atomic():
                reports[name] = import_file(IMPORTER, name="backup.jsonl", data=data)
                if name == "first":
                    release.wait(timeout=30)
        except Exception as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    first = threading.Thread(target=run, args=("first",))
    first.start()
    deadline = time.monotonic() + 30
    while "first" not in reports and first.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    second = threading.Thread(target=run, args=("second",))
    second.start()
    while not _waiting_on_a_lock() and second.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    release.set()
    first.join(30)
    second.join(30)
    assert not errors, errors
    return reports["first"], reports["second"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("record", [resource(), item()], ids=["resource", "knowledge"])
def test_the_same_file_imported_twice_at_once_stores_each_record_once_and_the_later_skips_it(record):
    first, second = _import_twice_at_once(export_of(record))

    assert (first.imported, first.failed) == (1, [])
    assert (second.imported, second.skipped, second.failed) == (0, 1, []), second.failed
    model = Resource if record["kind"] == "resource" else Knowledge
    assert model.objects.filter(pk=record["id"]).count() == 1


CSV_HEADER = "task,content,types,scopes\n"


def _csv_rows(count: int, *, bad_at: int | None = None, twice: int | None = None) -> bytes:
    rows = [f"Step {i},do step {i} then check,strategy,org:acme" for i in range(count)]
    if bad_at is not None:
        rows[bad_at] = f"Step {bad_at},do it,no-such-type,org:acme"
    if twice is not None:
        rows.append(rows[twice])
    return (CSV_HEADER + "\n".join(rows) + "\n").encode()


@pytest.mark.django_db
def test_a_csv_is_stored_in_batches_its_refused_and_repeated_rows_named_and_a_second_import_changes_nothing(
        monkeypatch):
    from ingest import importer

    from knowledge import bulk

    monkeypatch.setattr(importer, "CSV_BATCH", 3)
    batches, real = [], bulk.knowledge_bulk_create
    monkeypatch.setattr(bulk, "knowledge_bulk_create", lambda caller, entries, **kw: batches.append(len(entries)) or real(
        caller, entries, **kw))
    caller = Caller.system("command:import")
    data = _csv_rows(8, bad_at=4, twice=1)  # line 6 refused; the last line repeats line 3

    report = import_file(caller, name="steps.csv", data=data, scopes=["org:acme"])
    assert batches == [3, 3, 1]  # one INSERT a batch of checked rows

    assert (report.imported, report.skipped, [f["line"] for f in report.failed]) == (7, 1, [6])
    assert "types" in report.failed[0]["reason"]
    stored = Knowledge.objects.filter(task__startswith="Step ")
    assert sorted(stored.values_list("task", flat=True)) == sorted(f"Step {i}" for i in range(8) if i != 4)
    assert sorted(report.knowledge_ids) == sorted(stored.values_list("id", flat=True))
    assert sorted(stored.values_list("source__document__row", flat=True)) == [2, 3, 4, 5, 7, 8, 9]

    again = import_file(caller, name="steps.csv", data=data, scopes=["org:acme"])
    assert (again.imported, again.skipped, len(again.failed)) == (0, 8, 1)
    assert stored.count() == 7


@pytest.mark.django_db
def test_a_csv_batch_the_database_refuses_is_stored_row_by_row_naming_the_row(monkeypatch):
    from django.db import IntegrityError

    from ingest import importer
    from knowledge import bulk

    monkeypatch.setattr(importer, "CSV_BATCH", 4)

    def refusing(*args, **kwargs):
        raise IntegrityError("the batch as a whole")

    monkeypatch.setattr(bulk, "knowledge_bulk_create", refusing)
    report = import_file(Caller.system("command:import"), name="steps.csv", data=_csv_rows(6), scopes=["org:acme"])

    assert (report.imported, report.skipped, report.failed) == (6, 0, [])
    assert Knowledge.objects.filter(task__startswith="Step ").count() == 6 == len(report.knowledge_ids)


@pytest.mark.django_db
def test_a_markdown_file_of_more_sections_than_a_document_may_become_is_reported_and_stores_nothing(settings):
    settings.KNOWHUB_DOCUMENT_MAX_ITEMS = 3
    many = "\n\n".join(f"# Step {i}\n\nDo step {i}." for i in range(4)).encode()
    few = "\n\n".join(f"# Stage {i}\n\nDo stage {i}." for i in range(3)).encode()

    refused = import_file(Caller.system("command:import"), name="steps.md", data=many, scopes=["org:acme"])
    taken = import_file(Caller.system("command:import"), name="stages.md", data=few, scopes=["org:acme"])

    assert refused.imported == 0 and "more than 3 items" in refused.failed[0]["reason"]
    assert not Knowledge.objects.filter(task__startswith="Step").exists()
    assert taken.imported == 1 and Knowledge.objects.filter(task__startswith="Stage").count() == 3


# --- an item's versions -------------------------------------------------------------------------------------

OLD = {"number": 1, "task": "Rotate the keys yearly", "content": "Once a year.", "tags": {"domain": "security"},
       "changed_by": "user:carl", "reason": "policy", "created_at": "2024-05-01T10:00:00+00:00"}
BAD_VERSIONS = [
    # (the record's versions, the start of its reason: the version and its field, then the API's own words)
    ([{**OLD, "tags": ["x"]}], "versions.0.tags: Expected a dictionary"),
    ([{**OLD, "tags": {"domain": {"nested": [1]}}}], "versions.0.tags.domain: must be a string"),
    ([{**OLD, "tags": {"domain": "v" * 501}}], "versions.0.tags.domain: "),
    ([{**OLD, "task": "T" * (TASK_MAX + 1)}], "versions.0.task: Ensure this field has no more than 10000"),
    ([{**OLD, "content": "c" * (CONTENT_MAX + 1)}], "versions.0.content: "),
    ([{**OLD, "task": 42}], "versions.0.task: must be a string"),
    ([{**OLD, "content": "   "}], "versions.0.content: This field may not be blank."),
    ([OLD, {**OLD, "number": 2, "task": None}], "versions.1.task: "),
    ([{**OLD, "number": "1"}], "versions.0.number: "),
    ([{**OLD, "number": 0}], "versions.0.number: "),
    ([{key: value for key, value in OLD.items() if key != "content"}], "versions.0.content: This field is required."),
    ([{**OLD, "changed_by": "c" * 201}], "versions.0.changed_by: "),
    ([{**OLD, "created_at": "2024-13-45T10:00:00"}], "versions.0.created_at: "),
    (["Rotate the keys yearly"], "versions.0.non_field_errors: "),
    ({"1": OLD}, "versions: Expected a list"),
]


@pytest.mark.django_db
@pytest.mark.parametrize("versions, reason", BAD_VERSIONS, ids=[reason.split(":")[0] + f"-{n}"
                                                                 for n, (_, reason) in enumerate(BAD_VERSIONS)])
def test_a_version_the_api_would_refuse_fails_its_record_naming_the_version_and_its_field_and_stores_nothing(
        versions, reason):
    """A version comes back into the live item when it is restored (knowledge_restore_version): it is held to the
    rules of the item's own text and tags, or the restore would fail (tags not an object) or write past them."""
    from knowledge.models import KnowledgeVersion

    report = import_file(IMPORTER, name="backup.jsonl", data=export_of(item(versions=versions), GOOD_ITEM))

    assert [f["line"] for f in report.failed] == [2], report.failed
    assert report.failed[0]["reason"].startswith(reason), report.failed
    assert report.imported == 1 and report.knowledge_ids == [GOOD_ITEM["id"]]
    assert not Knowledge.objects.filter(pk=ITEM_ID).exists() and not KnowledgeVersion.objects.exists()


@pytest.mark.django_db
def test_a_record_updating_a_stored_item_with_a_bad_version_changes_nothing():
    make_knowledge(knowledge_id=ITEM_ID, task="Rotate the keys", content="Monthly.", scopes=["org:acme"])
    record = item(content="Weekly now.", versions=[{**OLD, "tags": ["x"]}])

    report = import_file(IMPORTER, name="backup.jsonl", data=export_of(record))

    assert report.failed[0]["reason"].startswith("versions.0.tags: ") and report.knowledge_ids == []
    assert Knowledge.objects.get(pk=ITEM_ID).content == "Monthly."


@pytest.mark.django_db
def test_an_old_versions_tag_names_come_back_as_an_earlier_hub_stored_them_and_restore_into_the_item():
    """As the item's own tags: an earlier hub's names (before names were held to the filters' rule) are kept; their
    values and the text are checked. Restoring the version then stores what the API's edit would."""
    versions = [{**OLD, "tags": {"old name!": "kept", "domain": "security"}}]

    report = import_file(IMPORTER, name="backup.jsonl", data=export_of(item(versions=versions)))

    assert (report.imported, report.failed) == (1, [])
    restored = services.knowledge_restore_version(IMPORTER, knowledge_id=ITEM_ID, number=1)
    assert (restored.task, restored.tags) == ("Rotate the keys yearly", {"old name!": "kept", "domain": "security"})


# --- what a report lists ----------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_a_record_whose_update_is_refused_is_reported_failed_and_not_listed_among_the_ids_imported():
    from knowledge import slim

    first = make_knowledge(task="Indent with tabs", content="Tabs", scopes=["org:acme"])
    second = make_knowledge(task="Use tabs", content="Tabs, width 4", scopes=["org:acme"])
    merged = slim.merge_group(IMPORTER, [first.id, second.id], text={"task": "Tabs", "content": "Tabs, 4 wide"})
    record = item(id=first.id, task="Indent with spaces", content="Four spaces")  # a merged item is not edited

    report = import_file(IMPORTER, name="backup.jsonl", data=export_of(record, GOOD_ITEM))

    assert [f["line"] for f in report.failed] == [2] and merged.id in report.failed[0]["reason"]
    assert report.knowledge_ids == [GOOD_ITEM["id"]] and (report.imported, report.updated) == (1, 0)
    assert Knowledge.objects.get(pk=first.id).task == "Indent with tabs"


# --- what a report holds of the file -----------------------------------------------------------------------------

@pytest.mark.django_db
@pytest.mark.parametrize("text, line", [
    ("task,content,types\nGood one,c,strategy\nBad one,c,strat\x00egy\nGood two,c,strategy\n", 3),
    ("task,content,ty\x00pes\nA row,c,strategy\n", 2),
], ids=["cell", "header"])
def test_a_nul_of_the_file_is_never_echoed_into_the_report_a_job_stores(text, line):
    report = import_file(IMPORTER, name="tips.csv", data=text.encode(), scopes=["org:acme"])

    failure = next(f for f in report.failed if f["line"] == line)
    assert "\ufffd" in failure["reason"], report.failed
    assert "\x00" not in json.dumps(report.as_dict(), ensure_ascii=False)
