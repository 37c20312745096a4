"""Import: our own JSON Lines export, a CSV with one item per row, or Markdown (a file, a folder or a zip).

The format is taken from the file's extension. Every record is checked and stored on its own (a savepoint
each), so a file with bad records still imports the good ones, and the report names each failure with its
line (or file) and reason, the field first. A record is held to the API's rules for the same values (the
serializers a request passes, a body's no-NUL rule), so an import stores nothing a request would be refused;
an export's values are checked, never changed (of its `source`, the links: `inputs.source_links_check`; an
item's `versions` as its own text and tags: `ExportedVersion`). A report never echoes a NUL or a lone surrogate
of the file (a job's result could not store it): they are shown as U+FFFD.
Re-running an import changes nothing, and neither does the same file imported twice at once (an id stored by the
other run meanwhile is looked at again, as if it had been there):

- JSON Lines: an id that is stored already is skipped when its text is the same, or brought up to date as a
  new version; resources likewise by id. Secrets are read as the export wrote them (`ingest.export`); a wrong
  passphrase refuses the whole file before anything is stored. An item's status and merge link are restored only
  as the API's supersede and merge would make them (`knowledge.restore.knowledge_restore_links`).
- CSV: a row whose task and content are stored already from the same file is skipped.
- Markdown: each file is chunked as document ingestion does (`ingest.chunks.apply_chunks`), so unchanged
  files are skipped and changed ones update their chunks. A zip's file is the document "<zip name>/<its path>"
  (two zips' README.md are two documents); items imported when it was named by its path alone are taken over
  by the same file imported again (`ingest.chunks.adopt_former_items`).

CSV columns (a header row; `task`, `content` and `types` are required): task, content, types, tags, scopes,
score, confidence, owner, source_name, source_category, urls, message_id. List cells (types, scopes, urls)
separate their values with `;` or `,`; tags are `key=value; key=value` or a JSON object.
"""
import csv
import io
import json
import sys
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.db import DataError, IntegrityError, OperationalError, transaction
from django.conf import settings
from django.utils.translation import gettext as _
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError

from core.errors import DomainError, first_message, invalid_fields
from core.fields import TEXT_VALUES, StrictCharField, StrictIntegerField
from core.safe_json import json_problem, storable
from ingest import chunking, extract, passphrase as sealed
from ingest.chunks import adopt_former_items, apply_chunks, items_of, lock_document, sha256
from ingest.readers.archives import ArchiveRefused, open_bounded
from ingest.export import FORMAT, VERSION
from ingest.inputs import ImportInput
from knowledge import restore, services
from knowledge.errors import KnowledgeIdConflictError
from knowledge.inputs import CaseField, KnowledgeCreateInput, source_links_check
from knowledge.limits import CONTENT_MAX, TASK_MAX
from knowledge.serializers import COUNTER_MAX, EvalSerializer, KnowledgeSerializer, TagsField
from knowledge.models import FeedbackCase, Knowledge
from knowledge.search import indexing
from resources import crypto
from resources.models import Resource
from resources.serializers import ResourceInput
from resources.services import resource_restore

EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".md": "markdown", ".markdown": "markdown",
              ".zip": "zip"}
CSV_COLUMNS = ("task", "content", "types", "tags", "scopes", "score", "confidence", "owner", "source_name",
               "source_category", "urls", "message_id")
DEFAULT_TYPES = ["definition"]


class ImportRefused(DomainError):
    """The file as a whole cannot be imported (unknown format, not our export, a missing passphrase)."""

    code = "invalid"


@dataclass
class ImportReport:
    format: str
    imported: int = 0
    updated: int = 0
    skipped: int = 0
    failed: list[dict] = field(default_factory=list)
    knowledge_ids: list[str] = field(default_factory=list)

    def fail(self, where, reason: str) -> None:
        # a reason echoes the file (a cell's value, a column's or a member's name): never a NUL or a lone
        # surrogate, which the job's result (jsonb) could not store, losing the whole report
        self.failed.append({"line": storable(where), "reason": storable(reason)})

    def as_dict(self) -> dict:
        return {"format": self.format, "imported": self.imported, "updated": self.updated, "skipped": self.skipped,
                "failed": self.failed, "knowledge_ids": self.knowledge_ids}


def format_of(name: str) -> str:
    suffix = PurePosixPath(name.lower()).suffix
    try:
        return EXTENSIONS[suffix]
    except KeyError:
        raise ImportRefused(_("cannot import %(name)r: the format is taken from the extension, one of %(extensions)s")
                            % {"name": name, "extensions": ", ".join(sorted(EXTENSIONS))}, field="file") from None


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return invalid_fields(exc.detail)[0]
    if isinstance(exc, PermissionDenied):
        return str(exc.detail)
    if isinstance(exc, DomainError):
        return exc.api_message() if exc.field else exc.message
    if isinstance(exc, (IntegrityError, DataError)):
        return _database_reason(exc)
    if isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], str):
        return f"{exc.args[0]}: {serializers.Field.default_error_messages['required']}"
    return f"{type(exc).__name__}: {exc}"


def _database_reason(exc: IntegrityError | DataError) -> str:
    """What PostgreSQL refused in a record that passed the importer's checks, in its words (the key that exists
    already, the value too long), naming the column or the constraint when it does. A record stored meanwhile by
    another import is not one: it is looked at again (`_knowledge`, `_resource`)."""
    cause = exc.__cause__
    diag = getattr(cause, "diag", None)
    said = [getattr(diag, "message_primary", None), getattr(diag, "message_detail", None)]
    problem = " ".join(filter(None, said)) or str(cause or exc).strip()
    where = getattr(diag, "column_name", None) or getattr(diag, "constraint_name", None)
    return _("the database refused this record: %(problem)s") % {"problem": f"{where}: {problem}" if where else problem}


def _is_primary_key_violation(exc: IntegrityError, model) -> bool:
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) == f"{model._meta.db_table}_pkey"


RECORD_ERRORS = (DomainError, PermissionDenied, ValidationError, IntegrityError, DataError, KeyError, TypeError,
                 ValueError, AttributeError, Knowledge.DoesNotExist)


def _each(report: ImportReport, where, store: Callable[[], str]) -> None:
    """Run `store` in a savepoint; it returns "imported", "updated" or "skipped"; a failure is reported, and
    none of the ids `store` listed before it failed stays in the report (nothing of it was stored)."""
    listed = len(report.knowledge_ids)
    try:
        with transaction.atomic():
            outcome = store()
    except RECORD_ERRORS as exc:
        del report.knowledge_ids[listed:]
        report.fail(where, _reason(exc))
        return
    setattr(report, outcome, getattr(report, outcome) + 1)


def import_path(caller, path: Path, **options) -> ImportReport:
    """A file, or a folder of Markdown files (recursively)."""
    if path.is_dir():
        _check_scopes_option(options.get("scopes"))
        files = sorted(p for p in path.rglob("*") if p.suffix.lower() in (".md", ".markdown") and p.is_file())
        report = ImportReport(format="markdown")
        for n, file in enumerate(files, start=1):
            _markdown(caller, report, uri=file.relative_to(path).as_posix(), data=file.read_bytes(), **_md(options))
            if options.get("progress"):
                options["progress"](n, len(files))
        return report
    return import_file(caller, name=path.name, data=path.read_bytes(), **options)


def _check_scopes_option(scopes) -> None:
    """`scopes` held to the import operation's rule for them (`ImportInput`: kind:name, each at most 200
    characters), for the callers that do not pass a request through it (`manage.py import`)."""
    if not scopes:
        return
    rule = ImportInput()
    try:
        rule.validate_scopes(rule.fields["scopes"].run_validation(list(scopes)))
    except ValidationError as exc:
        raise ImportRefused(first_message(exc.detail), field="scopes") from None


def _md(options: dict) -> dict:
    return {"scopes": options.get("scopes"), "types": options.get("types")}


def check_file(*, name: str, data: bytes, scopes: list[str] | None = None, passphrase: str | None = None) -> str:
    """What refuses a file as a whole before any record is read: its extension, the `scopes` given and, for an
    export, its header (ours, this version, the passphrase its secrets need, its key parameters) and whether the
    passphrase opens its secrets (the header's key check, or an older export's first sealed secret); the format.
    Raises ImportRefused or WrongPassphrase: a request answers these at once, before the import is queued."""
    kind = format_of(name)
    _check_scopes_option(scopes)
    if kind == "jsonl":
        lines = _lines(data)
        first = next(lines, None)
        _SecretReader(_header(first[1] if first else None), passphrase).check_opens(lines)
    return kind


def import_file(caller, *, name: str, data: bytes, scopes: list[str] | None = None, types: list[str] | None = None,
                passphrase: str | None = None, progress: Callable[[int, int], None] | None = None) -> ImportReport:
    """Import the file `name` (its bytes `data`) as `caller`; `scopes` for records that name none (CSV, Markdown)
    or, for an export, the only scopes to take from it."""
    kind = format_of(name)
    _check_scopes_option(scopes)
    if kind == "jsonl":
        return _jsonl(caller, data, scopes=scopes, passphrase=passphrase, progress=progress)
    if kind == "csv":
        return _csv(caller, name, data, scopes=scopes, progress=progress)
    report = ImportReport(format="markdown")
    if kind == "markdown":
        _markdown(caller, report, uri=name, data=data, scopes=scopes, types=types)
        return report
    try:
        archive = open_bounded(data, name)
    except ArchiveRefused as exc:
        raise ImportRefused(str(exc), field="file") from None
    copies = [m for m in archive.infolist() if m.filename.lower().endswith((".md", ".markdown")) and not m.is_dir()]
    last = {m.filename: m for m in copies}  # a path held twice is one document: its last copy, as unzip leaves it
    for m in copies:
        if last[m.filename] is not m:
            report.fail(m.filename, _("the zip holds this path again later: only its last copy is imported"))
    members = sorted(last)
    for n, member in enumerate(members, start=1):
        try:
            content = archive.read(last[member])
        except (zipfile.BadZipFile, RuntimeError, NotImplementedError, ValueError, OSError) as exc:
            report.fail(member, f"cannot be read from the zip: {exc}")
            continue
        _markdown(caller, report, uri=zip_member_uri(name, member), data=content, scopes=scopes, types=types,
                  former_uri=member, where=member)
        if progress:
            progress(n, len(members))
    return report


# --- Markdown ---

def zip_member_uri(archive: str, member: str) -> str:
    """The document a zip's member is: the zip's name and the member's path ("handbook.zip/ops/deploy.md"), so
    that the same path in two zips is two documents, and the same zip imported again the same one."""
    return f"{archive}/{member}"


def _markdown(caller, report: ImportReport, *, uri: str, data: bytes, scopes, types, former_uri: str | None = None,
              where: str | None = None) -> None:
    def store() -> str:
        document = extract.extract(data, "markdown")
        pieces = chunking.chunk(document, fallback_title=PurePosixPath(uri).stem,
                                max_chunks=settings.KNOWHUB_DOCUMENT_MAX_ITEMS)  # as an uploaded document's
        into, digest = caller.scopes_to_write(scopes), sha256(data)
        if former_uri is not None:
            adopt_former_items(caller, kind="markdown", uri=uri, former_uri=former_uri, content_hash=digest,
                               scopes=into)
        outcome = apply_chunks(caller, kind="markdown", uri=uri, content_hash=digest, chunks=pieces,
                               scopes=into, types=list(types or DEFAULT_TYPES), source_name=uri)
        report.knowledge_ids.extend(outcome.item_ids)
        if outcome.unchanged_document:
            return "skipped"
        return "updated" if (outcome.updated or outcome.archived) and not outcome.created else "imported"

    _each(report, where or uri, store)


# --- CSV ---

def _split(cell: str) -> list[str]:
    return [part.strip() for part in cell.replace(";", ",").split(",") if part.strip()]


def _tags(cell: str) -> dict:
    cell = cell.strip()
    if not cell:
        return {}
    if cell.startswith("{"):
        try:
            return json.loads(cell)
        except RecursionError:  # not a JSONDecodeError (a ValueError): the row would stop the whole import
            raise ValueError("tags: the JSON object nests too deep") from None
    pairs = [part.split("=", 1) for part in cell.split(";") if part.strip()]
    if any(len(pair) != 2 for pair in pairs):
        raise ValueError("tags: write key=value; key=value, or a JSON object")
    return {key.strip(): value.strip() for key, value in pairs}


def _csv_body(row: dict) -> dict:
    unknown = set(row) - set(CSV_COLUMNS) - {None}
    if unknown:
        raise ValueError(f"unknown column(s): {', '.join(sorted(unknown))} (columns: {', '.join(CSV_COLUMNS)})")
    get = lambda name: (row.get(name) or "").strip()  # noqa: E731
    body = {"task": get("task"), "content": get("content"), "types": _split(get("types")), "tags": _tags(get("tags"))}
    body.update({k: v for k, v in {"scopes": _split(get("scopes")), "owner": get("owner"), "message_id": get("message_id"),
                                    # as written: the API's fields read the numbers, or say what is wrong with them
                                    "score": get("score") or None,
                                    "eval": {"confidence": get("confidence")} if get("confidence") else None,
                                    }.items() if v})
    source = {"name": get("source_name"), "category": get("source_category"), "urls": _split(get("urls"))}
    body["source"] = {k: v for k, v in source.items() if v}
    return body


# A row's body names some columns otherwise (`_csv_body`): a refusal names the column.
CSV_COLUMN_OF = {("source", "name"): "source_name", ("source", "category"): "source_category",
                 ("source", "urls"): "urls", ("eval", "confidence"): "confidence"}


def _csv_columns(refused: ValidationError) -> ValidationError:
    named = {}
    for key, detail in refused.detail.items():
        if isinstance(detail, dict) and any((key, inner) in CSV_COLUMN_OF for inner in detail):
            named.update({CSV_COLUMN_OF.get((key, inner), f"{key}.{inner}"): value for inner, value in detail.items()})
        else:
            named[key] = detail
    return ValidationError(named)


# A CSV's rows are checked one by one and stored CSV_BATCH at a time through the bulk path (knowledge/bulk.py: one
# INSERT for the batch, its embeddings queued together), in one transaction per batch: ~14x the rows a second of one
# save and commit per row (BENCHMARKS.md, "Writes"). A batch the database refuses as a whole is stored again row by
# row, so the report names the row.
CSV_BATCH = 500


@dataclass
class _Row:
    line: int
    data: dict
    content_hash: str


def _csv(caller, name: str, data: bytes, *, scopes, progress) -> ImportReport:
    report = ImportReport(format="csv")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ImportRefused(_("%(name)s is not UTF-8 text") % {"name": name}, field="file") from None
    csv.field_size_limit(max(csv.field_size_limit(), 4 * 100_000 + 1))  # a cell may hold a whole item's content
    try:
        rows = list(csv.DictReader(io.StringIO(text)))
    except csv.Error as exc:
        raise ImportRefused(_("%(name)s is not a readable CSV file: %(error)s") % {"name": name, "error": exc}, field="file") from None
    known: dict[tuple, set] = {}  # (scopes) -> content hashes of rows stored before from this file into them
    batch: list[_Row] = []
    for n, row in enumerate(rows, start=2):  # line 1 is the header
        try:
            checked = _csv_row(caller, row, line=n, name=name, scopes=scopes, known=known)
        except RECORD_ERRORS as exc:
            report.fail(n, _reason(exc))
        else:
            if checked is None:
                report.skipped += 1
            else:
                batch.append(checked)
        if len(batch) >= CSV_BATCH or (batch and n == len(rows) + 1):
            _csv_store(caller, name, batch, report, known)
            batch = []
        if progress:
            progress(n - 1, len(rows))
    return report


def _csv_row(caller, row: dict, *, line: int, name: str, scopes, known: dict[tuple, set]) -> _Row | None:
    """A row checked as the API checks a save (its refusal naming the column), or None when the file's row was
    stored before (its text's hash is among the items read from this file into the same scopes)."""
    entry = KnowledgeCreateInput(data=_csv_body(row), context={TEXT_VALUES: True})  # a cell's number is its text
    if not entry.is_valid():
        raise _csv_columns(ValidationError(entry.errors))
    data_ = dict(entry.validated_data)
    row_hash = sha256(f"{data_['task']}\n{data_['content']}")
    data_["scopes"] = sorted(set(caller.scopes_to_write(data_.pop("scopes", None) or scopes)))
    key = tuple(data_["scopes"])
    if key not in known:  # read once per scopes of the file (not setdefault: its default is read on every row)
        known[key] = set(restore_hashes(caller, name, "csv", data_["scopes"]))
    seen = known[key]
    if row_hash in seen:
        return None
    seen.add(row_hash)  # a second copy of the row further down the file is skipped too
    data_["source"] = {**data_.get("source", {}), "document": {"kind": "csv", "uri": name, "row": line,
                                                               "content_hash": row_hash}}
    return _Row(line, data_, row_hash)


def _csv_store(caller, name: str, batch: list[_Row], report: ImportReport, known: dict[tuple, set]) -> None:
    """Store `batch` in one transaction, the file locked for each of its scopes (another import of the same file
    waits, then finds these rows and skips them); a row another import stored meanwhile is skipped."""
    from knowledge.bulk import knowledge_bulk_create

    refusals: dict[int, Exception] = {}
    try:
        with transaction.atomic():
            fresh = []
            for key in sorted({tuple(row.data["scopes"]) for row in batch}):
                lock_document("csv", name, list(key))
                hashes = [row.content_hash for row in batch if tuple(row.data["scopes"]) == key]
                stored = set(restore_hashes(caller, name, "csv", list(key)).filter(
                    source__document__content_hash__in=hashes))
                fresh += [row for row in batch if tuple(row.data["scopes"]) == key and row.content_hash not in stored]
            fresh.sort(key=lambda row: row.line)
            items = iter(knowledge_bulk_create(caller, [row.data for row in fresh],
                                               refused=lambda position, exc: refusals.__setitem__(position, exc)))
    except (IntegrityError, DataError):  # one row the database refuses: each row on its own, to name it
        for row in batch:
            failures = len(report.failed)
            _each(report, row.line, lambda row=row: _csv_store_one(caller, name, row, report))
            if len(report.failed) > failures:
                known[tuple(row.data["scopes"])].discard(row.content_hash)
        return
    report.skipped += len(batch) - len(fresh)
    for position, row in enumerate(fresh):
        if position in refusals:
            report.fail(row.line, _reason(refusals[position]))
            known[tuple(row.data["scopes"])].discard(row.content_hash)
        else:
            report.knowledge_ids.append(next(items).id)
            report.imported += 1


def _csv_store_one(caller, name: str, row: _Row, report: ImportReport) -> str:
    lock_document("csv", name, row.data["scopes"])
    if restore_hashes(caller, name, "csv", row.data["scopes"]).filter(
            source__document__content_hash=row.content_hash).exists():
        return "skipped"
    report.knowledge_ids.append(services.knowledge_create(caller, **row.data).id)
    return "imported"


def restore_hashes(caller, uri: str, kind: str, scopes: list[str]) -> Iterable[str]:
    """The content hashes of the rows imported before from file `uri` into `scopes`, among what `caller` can read."""
    return items_of(uri, kind, scopes).visible_to(caller).values_list("source__document__content_hash", flat=True)


# --- our JSON Lines export ---

class _SecretReader:
    """How an export's secrets are read. Under a passphrase, a wrong one refuses the file as a whole
    (WrongPassphrase), never record by record after the items that need no secret were stored: the header's key
    check says so (`sealed.key_from_header`), or, in an export written before it had one, its first sealed secret
    (`check_opens`)."""

    def __init__(self, header: dict, passphrase: str | None):
        self.mode = (header.get("secrets") or {}).get("mode", "omitted")
        self.key = None
        self.verified = True
        if self.mode == "passphrase":
            if not passphrase:
                raise ImportRefused(_("this export's secrets are sealed under a passphrase: give it"), field="passphrase")
            self.key = sealed.key_from_header(passphrase, header["secrets"])
            self.verified = "check" in header["secrets"]

    def check_opens(self, lines: Iterable[tuple[int, str]]) -> None:
        """For an export whose header has no key check: WrongPassphrase unless the passphrase opens the first sealed
        secret of `lines` (the records after the header). Only lines naming a secret are read; none: nothing to
        open, nothing to refuse."""
        if self.verified:
            return
        for _n, line in lines:
            if '"secure_body"' not in line:
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue  # the import reports it by its line
            if not isinstance(record, dict) or record.get("kind") != "resource":
                continue
            versions = record.get("versions") if isinstance(record.get("versions"), list) else []
            for value in [record.get("secure_body"), *(v.get("secure_body") for v in versions if isinstance(v, dict))]:
                if isinstance(value, str) and value:
                    sealed.unseal(value, self.key)
                    self.verified = True
                    return

    def __call__(self, value: str) -> tuple[str, str]:
        """(plaintext to encrypt, installation ciphertext to store as it is), one of them empty."""
        if not value or self.mode == "omitted":
            return "", ""
        if self.mode == "passphrase":
            return sealed.unseal(value, self.key), ""
        try:
            crypto.decrypt(value)
        except crypto.InvalidToken:
            raise ImportRefused(_("a secret is encrypted under another installation's key: export it again with a "
                                  "passphrase"), field="secure_body") from None
        return "", value


def _lines(data: bytes):
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ImportRefused(_("the export is not UTF-8 text"), field="file") from None
    # only "\n" ends a line: the export writes U+2028 and its kin raw inside strings, and splitlines() would cut there
    for n, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip():
            yield n, line


def _header(line: str | None) -> dict:
    """An export's first line as its header; ImportRefused unless it is ours, of the version this hub reads."""
    try:
        header = json.loads(line) if line is not None else None
    except (json.JSONDecodeError, RecursionError):
        header = None
    if not isinstance(header, dict) or header.get("kind") != FORMAT:
        raise ImportRefused(_("line 1: not a KnowHub export (its first line is a header with kind %(kind)r)") % {"kind": FORMAT},
                            field="file")
    if header.get("version") != VERSION:
        raise ImportRefused(_("line 1: export version %(version)r; this hub reads version %(ours)s")
                            % {"version": header.get("version"), "ours": VERSION},
                            field="file")
    return header


# An export's records are stored JSONL_BATCH at a time in one transaction, each still in a savepoint of its own (a
# bad record fails alone) and the batch's embedding messages sent together: a commit and a message per record cost
# as much as the records (BENCHMARKS.md, "Writes"). A batch the database cannot finish as a whole (a deadlock with
# another import writing the same ids in another order) is stored again one record per transaction. Progress is
# written between batches, never inside one (the job's row is not held by the batch's transaction).
JSONL_BATCH = 100


@dataclass
class _JsonlRun:
    caller: object
    scopes: list[str] | None
    secret: "_SecretReader"
    vector_model: str
    report: ImportReport
    restored: list = field(default_factory=list)
    ended: bool = False

    def mark(self) -> tuple:
        r = self.report
        return r.imported, r.updated, r.skipped, len(r.failed), len(r.knowledge_ids), len(self.restored), self.ended

    def back_to(self, mark: tuple) -> None:
        r = self.report
        r.imported, r.updated, r.skipped, failed, ids, restored, self.ended = mark
        del r.failed[failed:], r.knowledge_ids[ids:], self.restored[restored:]


def _jsonl(caller, data: bytes, *, scopes, passphrase, progress) -> ImportReport:
    lines = list(_lines(data))
    secret = _SecretReader(_header(lines[0][1] if lines else None), passphrase)
    secret.check_opens(lines[1:])  # a wrong passphrase stores nothing
    run = _JsonlRun(caller, scopes, secret, _embedder_name(), ImportReport(format="jsonl"))
    records = lines[1:]
    for start in range(0, len(records), JSONL_BATCH):
        batch = records[start : start + JSONL_BATCH]
        mark = run.mark()
        try:
            with transaction.atomic(), indexing.embeddings_gathered():
                for n, line in batch:
                    _jsonl_record(run, n, line)
        except OperationalError:  # the batch rolled back as a whole: each record again, in a transaction of its own
            run.back_to(mark)
            for n, line in batch:
                _jsonl_record(run, n, line)
        if progress:
            progress(start + len(batch), len(records))
    for record, problem in restore.knowledge_restore_links(caller, run.restored):
        run.report.fail(record.get("id"), problem)
    if not run.ended:
        run.report.fail(None, "the export has no end record: it was cut short, and what follows the last line is missing")
    return run.report


def _jsonl_record(run: _JsonlRun, n: int, line: str) -> None:
    caller, report = run.caller, run.report
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:
        report.fail(n, f"not JSON: {getattr(exc, 'msg', 'nested too deeply')}")
        return
    kind = record.get("kind") if isinstance(record, dict) else None
    record_scopes = record.get("scopes") if isinstance(record, dict) else None
    if run.scopes and kind in ("resource", "knowledge") and isinstance(record_scopes, list) \
            and not set(map(str, record_scopes)) & set(run.scopes):
        return
    if kind == "end":
        run.ended = True
        return
    unstorable = json_problem(record, max_depth=sys.getrecursionlimit())  # its depth: json.loads bounded it
    if unstorable:  # what the API's parser refuses anywhere in a body, and PostgreSQL could not store
        report.fail(n, "%s: %s" % unstorable)
        return
    if kind == "resource":
        _each(report, n, lambda: _resource(caller, record, run.secret))
    elif kind == "knowledge":
        _each(report, n, lambda: _knowledge(caller, record, run.vector_model, run.restored, report))
    elif kind == "slim_rejection":
        _each(report, n, lambda: "imported" if restore.slim_rejection_restore(
            caller, first=record["first"], second=record["second"], rejected_by=record.get("rejected_by", ""),
            created_at=record.get("created_at")) else "skipped")
    else:
        report.fail(n, f"unknown record kind {kind!r}")


RESOURCE_FIELDS = ("id", "title", "body", "content_type", "metadata", "expires_at")  # the secret comes sealed: not judged


def _resource(caller, record: dict, secret: _SecretReader) -> str:
    # the API's rules for a saved resource; scopes are named (an export always names them; a request gets a default)
    given = {name: record[name] for name in RESOURCE_FIELDS if record.get(name) is not None}
    ResourceInput(data={**given, "scopes": record.get("scopes") or []}).is_valid(raise_exception=True)
    existing = Resource.objects.filter(pk=record["id"]).first()
    if existing is None:
        try:
            resource_restore(caller, record, secret=lambda: secret(record.get("secure_body", "")),
                             version_secret=lambda v: secret(v.get("secure_body", "")))
        except IntegrityError as exc:  # stored since this import looked (the same file imported at once): look again
            if not _is_primary_key_violation(exc, Resource):
                raise
            existing = Resource.objects.get(pk=record["id"])
        else:
            return "imported"
    if not Resource.objects.visible_to(caller).filter(pk=existing.pk).exists():
        raise ImportRefused(_("the resource id %(id)s is taken") % {"id": record["id"]}, field="id")  # say no more about it
    same = (existing.title, existing.body, existing.content_type, existing.metadata) == (
        record["title"], record.get("body", ""), record.get("content_type", "text"), record.get("metadata") or {})
    if same:
        return "skipped"
    raise ImportRefused(_("resource %(id)s exists with other content; it was left as it is") % {"id": record["id"]},
                        field="id")


def _knowledge(caller, record: dict, vector_model: str, restored: list, report: ImportReport) -> str:
    # an exported id is in the hub's format (what KnowledgeSerializer, the seed's shape, takes)
    KnowledgeSerializer(data={"id": record.get("id")}, partial=True).is_valid(raise_exception=True)
    body = {name: record[name] for name in ("task", "content", "types", "message_id", "secure_resource_id",
                                            "resource_ids") if name in record}
    if record.get("owner"):  # none: the caller, as a save's
        body["owner"] = record["owner"]
    # what a save takes (scopes named: an export always names them); the values stored are the record's own
    entry = KnowledgeCreateInput(data={**body, "scopes": record.get("scopes") or [], "score": record.get("score", 3)})
    entry.is_valid(raise_exception=True)
    source_links_check(record.get("source") or {})
    try:  # the names an earlier hub stored come back whatever they are (the values are checked)
        TagsField(names_checked=False).run_validation(record.get("tags") or {})
    except ValidationError as exc:
        raise ValidationError({"tags": exc.detail}) from None
    counters = EvalSerializer(data={name: record[name] for name in ("helpful", "harmful", "confidence") if name in record})
    counters.is_valid(raise_exception=True)  # each within its column's range: a reason naming it, not the database's
    check_history(record)
    if not Knowledge.objects.filter(pk=record["id"]).exists():
        try:
            item = restore.knowledge_restore(caller, record, vector_model=vector_model)
        except KnowledgeIdConflictError:  # stored since this import looked (the same file imported at once): look again
            pass
        else:
            restored.append(record)
            report.knowledge_ids.append(item.id)
            return "imported"
    if not Knowledge.objects.visible_to(caller).filter(pk=record["id"]).exists():
        raise ImportRefused(_("the knowledge id %(id)s is taken") % {"id": record["id"]}, field="id")  # no more said
    changed = restore.knowledge_update_text(caller, knowledge_id=record["id"], record=record,
                                            reason="import: the export's text")
    report.knowledge_ids.append(record["id"])  # once brought up to date (or found so): a refused update lists none
    return "updated" if changed else "skipped"


class ExportedVersion(serializers.Serializer):
    """One of an exported item's earlier texts (`versions`), held to the rules its text had as the item's: task and
    content as a save takes them (`KnowledgeCreateInput`), tags as the item's own are imported (string values within
    their limit; the names as the earlier hub stored them, `TagsField(names_checked=False)`), and what the version
    row holds within its columns. Restoring a version puts its task, content and tags back into the live item
    (`knowledge_restore_version`), so a version is no way around the item's rules. Keys it does not know are
    ignored, as the item record's are."""

    number = StrictIntegerField(min_value=1, max_value=COUNTER_MAX)
    task = StrictCharField(max_length=TASK_MAX)
    content = StrictCharField(max_length=CONTENT_MAX, trim_whitespace=False)
    tags = TagsField(names_checked=False, required=False)
    changed_by = StrictCharField(max_length=200, required=False, allow_blank=True)
    reason = StrictCharField(required=False, allow_blank=True, trim_whitespace=False)
    created_at = serializers.DateTimeField(required=False, allow_null=True)


class ExportedCase(serializers.Serializer):
    """One of an exported item's feedback cases (`feedback`): what a report stores. The case itself as a report
    takes it (`CaseField`), but for the two keys the hub adds to every case it stores (its `timestamp` and
    `reported_by`); the reporter within its column. Keys it does not know are ignored, as the item record's are."""

    kind = serializers.ChoiceField(choices=FeedbackCase.Kind.values)
    case = CaseField(required=False, allow_null=True, added_keys=("timestamp", "reported_by"))
    reported_by = StrictCharField(max_length=200, required=False, allow_blank=True)
    created_at = serializers.DateTimeField(required=False, allow_null=True)


class _History(serializers.Serializer):
    versions = serializers.ListField(child=ExportedVersion(), required=False, allow_null=True)
    feedback = serializers.ListField(child=ExportedCase(), required=False, allow_null=True)


def check_history(record: dict) -> None:
    """ValidationError naming the first version or case at fault and its field (`versions.1.task: ...`,
    `feedback.0.kind: ...`)."""
    history = {name: record[name] for name in ("versions", "feedback") if record.get(name) not in (None, [])}
    if history:
        _History(data=history).is_valid(raise_exception=True)


def _embedder_name() -> str:
    return settings.KNOWHUB_EMBEDDING_MODEL
