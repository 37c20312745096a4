"""Imports by a job: the request stores the file and answers at once, a worker imports it and reports progress.

`import_request` (the request) refuses at once what refuses a file as a whole before any record is read (a file
over KNOWHUB_IMPORT_MAX_BYTES: 413, `manage.py import` has no such limit; the extension, the scopes' shape, an
export's header and passphrase: `importer.check_file`; `scopes` the caller may not write: 403, as a document's),
stores the upload
(`ImportUpload`: the bytes, the options, the passphrase encrypted with the installation's key, the rights of the
caller) and queues an "import" job. `import_run` (the worker) imports the file as that caller with the rights it
holds when the job runs (`agents.requesters.requester_now`: a token revoked or a person's account disabled or left
without write rights since the request fails the job, and nothing is imported; `importer.import_file`), writing how many records or rows of the total it has read as it goes, and ends
the job with the import's report as its result (`ImportReport.as_dict`, what the request answered before) or
with the reason the file was refused; either way the upload, bytes and passphrase, is deleted with the job's end.
What ends a job never holds a NUL or a lone surrogate (the file's text echoed in a reason or an error): jsonb and
text columns cannot store them, and the job would end without its report.

Running a job again imports nothing twice: an import is idempotent (what is stored already is skipped), so a
copy re-sent after its worker died mid-file stores only what the dead one had not, and of two runs of one job only
the latest claim ends it.
"""
import dataclasses

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from agents.caller import Caller
from agents.requesters import requester_now
from core.errors import DomainError
from core.safe_json import storable
from ingest import importer
from ingest.models import ImportUpload
from jobs.models import Job
from jobs.services import ProgressWriter, job_claim, job_create, job_fail, job_succeed
from resources import crypto

PROGRESS_INTERVAL = 0.5  # seconds between two progress writes of one job (the last record always writes)


class ImportTooLarge(DomainError):
    """A file over KNOWHUB_IMPORT_MAX_BYTES (413 naming the field it came in)."""

    status = 413
    code = "too_large"


def import_request(caller: Caller, *, name: str, data: bytes, scopes: list[str] | None = None,
                   types: list[str] | None = None, passphrase: str | None = None, field: str = "file") -> Job:
    """Queue the import of the file `name` (its bytes `data`, given as `field`) as `caller`; the queued job.

    Raises ImportTooLarge for a file over KNOWHUB_IMPORT_MAX_BYTES, ImportRefused (or WrongPassphrase) for a file
    refused as a whole by its extension, scopes, header or passphrase, PermissionDenied for `scopes` the caller may not
    write (the records an import takes from them could only fail)."""
    limit = settings.KNOWHUB_IMPORT_MAX_BYTES
    if len(data) > limit:
        raise ImportTooLarge(_("%(name)s is larger than %(limit)s bytes, the most an import by the API takes: import "
                               "a larger export on the server with `manage.py import FILE`, which has no such limit")
                             % {"name": name, "limit": f"{limit:,}"}, field=field)
    kind = importer.check_file(name=name, data=data, scopes=scopes, passphrase=passphrase)
    if scopes:
        caller.require_write(scopes)
    with transaction.atomic():
        upload = ImportUpload.objects.create(
            name=name, data=data, scopes=list(scopes or ()), types=list(types or ()), caller=_rights_of(caller),
            passphrase=crypto.encrypt(passphrase) if passphrase else "", requested_by=caller.principal)
        # visible to its requester while it may read every scope the import may write (jobs.kinds)
        writable = None if caller.writable_scopes is None else sorted(caller.writable_scopes)
        return job_create(kind="import", requested_by=caller.principal,
                          params={"upload": str(upload.id), "name": name, "format": kind, "bytes": len(data),
                                  "writable_scopes": writable},
                          progress={"file": name, "format": kind, "done": 0, "total": None})


def import_run(*, job_id: str, worker: str = "", task_id: str = "") -> None:
    """Import the job's upload (the worker). Safe to run again: see the module's docstring."""
    attempt = job_claim(job_id=job_id, worker=worker, task_id=task_id)
    if not attempt:
        return
    params = Job.objects.values_list("params", flat=True).get(pk=job_id)
    upload = ImportUpload.objects.filter(pk=params.get("upload")).first()
    if upload is None:
        import_end(job_id=job_id, attempt=attempt, error=_("the uploaded file is no longer stored: import it again"))
        return
    try:
        requester = requester_now(caller_of(upload.caller))
        if not requester.curates:  # an import is a curator's operation: a token no longer a curator's imports nothing
            raise importer.ImportRefused(_("the requester may no longer import (a curators' operation): nothing "
                                           "was imported"))
        report = importer.import_file(
            requester, name=upload.name, data=bytes(upload.data), scopes=list(upload.scopes) or None,
            types=list(upload.types) or None, passphrase=crypto.decrypt(upload.passphrase) if upload.passphrase else None,
            progress=Progress(job_id, attempt, file=upload.name, format=params.get("format", "")))
    except DomainError as exc:  # the file refused as a whole (ImportRefused, WrongPassphrase); records report theirs
        import_end(job_id=job_id, attempt=attempt, error=exc.api_message())
        return
    import_end(job_id=job_id, attempt=attempt, result=report.as_dict())


def import_end(*, job_id, attempt: int | None = None, result: dict | None = None, error: str | None = None) -> bool:
    """End the job (succeeded with `result`, or failed with `error`) and delete its upload with it, in one
    transaction; False, deleting nothing, when this attempt no longer holds the job (a later claim ends it).
    NULs and lone surrogates in either (the file's text echoed) are stored as U+FFFD."""
    with transaction.atomic():
        if error is None:
            ended = job_succeed(job_id=job_id, result=storable(result), attempt=attempt)
        else:
            ended = job_fail(job_id=job_id, error=storable(str(error)), attempt=attempt)
        if ended:
            params = Job.objects.values_list("params", flat=True).get(pk=job_id)
            ImportUpload.objects.filter(pk=params.get("upload")).delete()
    return ended


class Progress:
    """The importer's `progress(done, total)` as the job's progress, written at most every PROGRESS_INTERVAL
    seconds (one UPDATE per record would cost as much as the records), and always for the last one."""

    def __init__(self, job_id, attempt: int, **about):
        self.about, self.writer = storable(about), ProgressWriter(job_id=job_id, attempt=attempt, every=PROGRESS_INTERVAL)

    def __call__(self, done: int, total: int) -> None:
        self.writer.write({**self.about, "done": done, "total": total}, last=done >= total)


def _rights_of(caller: Caller) -> dict:
    return json_safe(dataclasses.asdict(caller))


def json_safe(value):
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    return value


def caller_of(rights: dict) -> Caller:
    """The caller an upload was stored by, with the rights its request had."""
    known = {f.name for f in dataclasses.fields(Caller)}
    fields = {k: v for k, v in rights.items() if k in known}
    for key in ("readable_scopes", "writable_scopes"):
        if fields.get(key) is not None:
            fields[key] = tuple(fields[key])
    return Caller(**fields)
