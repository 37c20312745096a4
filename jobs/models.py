import uuid

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from jobs.kinds import scopes_params, subject_readers


class WorkerHeartbeat(models.Model):
    """One row per running Celery worker instance, refreshed every few seconds.

    Keyed by instance (hostname/pid/boot id, see jobs.instance), not hostname:
    a worker restarted under the same name is a new instance, and the jobs the
    dead one had claimed must not look alive through the new one's beats.

    Kept in the database rather than asked of the broker because the default
    broker (kombu's SQLAlchemy transport) has no broadcast, so `celery inspect
    ping` cannot reach workers through it.
    """

    instance = models.CharField(max_length=255, unique=True)
    hostname = models.CharField(max_length=255, db_index=True)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["hostname", "started_at"]
        verbose_name = _("worker heartbeat")
        verbose_name_plural = _("worker heartbeats")

    def __str__(self) -> str:
        return self.instance


class JobQuerySet(models.QuerySet):
    def visible_to(self, caller):
        """Jobs whose subject `caller` can read (through its kind, see jobs.kinds); a job without a subject, to
        whoever asked for it while it may read every scope the job works over. Asking is not enough for a job about
        a subject: another token of the same agent, or the same token once the item moved, may not read it."""
        if caller.readable_scopes is None:
            return self
        readers, scoped = subject_readers(), scopes_params()
        readable = list(caller.readable_scopes)
        visible = models.Q(requested_by=caller.principal) & ~models.Q(kind__in=list(readers))
        for kind, key in scoped.items():  # its scopes all readable (None, every scope: never, for such a caller)
            visible &= ~models.Q(kind=kind) | models.Q(**{f"params__{key}__contained_by": readable})
        for kind, readable_subjects in readers.items():
            visible |= models.Q(kind=kind, subject__in=readable_subjects(caller.readable_scopes))
        return self.filter(visible)


class Job(models.Model):
    """A background job an agent or curator asked for; its state is what GET /api/jobs/{id} shows."""

    objects = JobQuerySet.as_manager()

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    # The states a job may move to each state from; jobs.services moves it with a conditional UPDATE on these.
    MOVES_TO = {
        Status.RUNNING: (Status.QUEUED, Status.RUNNING),  # claimed; claimed again by its own retry, or after its worker died
        Status.QUEUED: (Status.RUNNING,),  # taken back from a dead worker
        Status.SUCCEEDED: (Status.RUNNING,),
        Status.FAILED: (Status.QUEUED, Status.RUNNING),
    }

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=20)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # What the job is about (an item's id for evolve), if anything; a plain id, not a foreign key, so that
    # jobs stays below the apps whose work it runs. The column keeps the name it had as a foreign key.
    subject = models.CharField(max_length=40, null=True, blank=True, db_index=True, db_column="knowledge_id")
    params = models.JSONField(default=dict, blank=True)
    progress = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    requested_by = models.CharField(max_length=200)
    attempts = models.PositiveSmallIntegerField(default=0)
    worker = models.CharField(max_length=255, blank=True, default="", help_text=_("the worker instance (hostname/pid/boot id) that claimed it last"))
    task_id = models.CharField(max_length=255, blank=True, default="", help_text=_("the broker message (Celery task id) that claimed it last"))
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(default=timezone.now, help_text=_("when its message was last sent to the broker"))
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "-created_at"], name="job_status_created")]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.status})"
