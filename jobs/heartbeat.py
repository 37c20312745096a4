"""A worker bootstep that records the worker instance (jobs.instance) as alive in the database."""
import logging
import os

from celery import bootsteps

from jobs.instance import worker_instance, worker_instance_start

logger = logging.getLogger(__name__)


class WorkerHeartbeatStep(bootsteps.StartStopStep):
    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        self.tref = None

    def start(self, worker):
        from django.conf import settings

        self.beat(worker)
        self.tref = worker.timer.call_repeatedly(
            settings.KNOWHUB_WORKER_HEARTBEAT_SECONDS, self.beat, (worker,), priority=10
        )

    def stop(self, worker):
        if self.tref:
            self.tref.cancel()
            self.tref = None
        instance = worker_instance()
        self._with_connection(lambda: _services().worker_heartbeat_clear(instance=instance))

    def beat(self, worker):
        instance = worker_instance() or worker_instance_start(hostname=worker.hostname)
        self._with_connection(
            lambda: _services().worker_heartbeat_record(instance=instance, hostname=worker.hostname, pid=os.getpid())
        )
        # Jobs of workers that died (SIGKILL, power loss) are sent again; see jobs_requeue_orphans.
        self._with_connection(_services().jobs_requeue_orphans)

    @staticmethod
    def _with_connection(fn):
        # Runs on the timer thread: drop connections the database has closed,
        # and never let a database hiccup kill the worker's timer.
        from django.db import close_old_connections

        close_old_connections()
        try:
            fn()
        except Exception:  # noqa: BLE001 - a missed beat is reported by /healthz
            logger.exception("worker heartbeat failed")


def _services():
    from jobs import services

    return services
