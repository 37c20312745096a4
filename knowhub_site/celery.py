"""The Celery app. Workers start with `celery -A knowhub_site worker`."""
import os

from celery import Celery, signals
from kombu.transport import TRANSPORT_ALIASES

# The default broker's scheme (settings._broker_from_database): kombu's SQL transport, publishing through Django's
# connection when it is on the broker's database (knowhub_site/broker.py).
TRANSPORT_ALIASES.setdefault("knowhub-sqla", "knowhub_site.broker:Transport")

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")

app = Celery("knowhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _install_worker_heartbeat(app: Celery) -> None:
    # Imported lazily: the step module touches Django models.
    from jobs.heartbeat import WorkerHeartbeatStep

    app.steps["worker"].add(WorkerHeartbeatStep)


@signals.worker_init.connect
def _name_worker_instance(sender, **kwargs):
    # In the main process, before the pool forks: the children inherit the name.
    from jobs.instance import worker_instance_start

    worker_instance_start(hostname=sender.hostname)


@signals.worker_process_init.connect
@signals.beat_embedded_init.connect
def _child_dies_with_worker(**kwargs):
    # Celery sets this for pool children itself, but not for the embedded beat
    # (`--beat`), which outlived a SIGKILLed worker and kept sending periodic tasks.
    from jobs.instance import die_with_parent

    die_with_parent()


@signals.setup_logging.connect
def _use_django_logging(loglevel=None, **kwargs):
    # Django's LOGGING (LOG_FORMAT: JSON lines by default, with the request id) instead of Celery's own
    # format; the worker's --loglevel still sets the level.
    import logging
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)
    if loglevel:
        logging.getLogger().setLevel(loglevel)


_install_worker_heartbeat(app)

from knowhub_site import job_observability  # noqa: E402,F401 - connects the job log line, metrics and request id
