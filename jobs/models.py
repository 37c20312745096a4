from django.db import models


class WorkerHeartbeat(models.Model):
    """One row per running Celery worker, refreshed every few seconds.

    Kept in the database rather than asked of the broker because the default
    broker (kombu's SQLAlchemy transport) has no broadcast, so `celery inspect
    ping` cannot reach workers through it.
    """

    hostname = models.CharField(max_length=255, unique=True)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["hostname"]

    def __str__(self) -> str:
        return f"{self.hostname} (pid {self.pid})"
