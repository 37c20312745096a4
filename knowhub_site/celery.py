"""The Celery app. Workers start with `celery -A knowhub_site worker`."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")

app = Celery("knowhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _install_worker_heartbeat(app: Celery) -> None:
    # Imported lazily: the step module touches Django models.
    from jobs.heartbeat import WorkerHeartbeatStep

    app.steps["worker"].add(WorkerHeartbeatStep)


_install_worker_heartbeat(app)
