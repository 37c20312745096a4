"""Values `/metrics` reads at scrape time: Celery queue lengths (from the broker) and the embedding backlog.

Each source is read on its own; one that fails (the broker down, a query refused) adds
to `knowhub_scrape_errors{source}` and is left out of that scrape, never failing it.
"""
import logging

from django.conf import settings
from prometheus_client.core import GaugeMetricFamily

from core.metrics import SCRAPE_ERRORS

logger = logging.getLogger(__name__)

BROKER_TIMEOUT_SECONDS = 3


def queue_names() -> list[str]:
    from knowhub_site.celery import app

    return sorted({app.conf.task_default_queue, *(app.amqp.queues or {}).keys()})


def queue_lengths(names: list[str]) -> dict[str, int]:
    """Messages waiting per queue: kombu's SQL transport counts its visible rows, Redis answers LLEN."""
    from kombu.exceptions import ChannelError

    from knowhub_site.celery import app

    lengths = {}
    with app.connection_for_read(settings.CELERY_BROKER_URL, connect_timeout=BROKER_TIMEOUT_SECONDS) as connection:
        # the default would retry a down broker for ever (as /healthz does, one try)
        connection.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_SECONDS)
        channel = connection.channel()
        try:
            for name in names:
                try:
                    lengths[name] = channel.queue_declare(queue=name, passive=True).message_count
                except ChannelError:  # no such queue yet: nothing was ever sent to it
                    lengths[name] = 0
        finally:
            session = getattr(channel, "_session", None)  # the SQL transport's: no transaction left open
            if session is not None:
                session.close()
            channel.close()
    return lengths


def embedding_backlog() -> int:
    """Items without a vector from the configured embedder: what the worker's embedding has still to do."""
    from knowledge.search.indexing import stale_items

    return stale_items(settings.KNOWHUB_EMBEDDING_MODEL).order_by().count()


class ScrapeTimeCollector:
    """A prometheus_client collector computing the scrape-time gauges."""

    def collect(self):
        queue = GaugeMetricFamily("knowhub_celery_queue_length", "Messages waiting in each Celery queue", labels=["queue"])
        try:
            for name, length in queue_lengths(queue_names()).items():
                queue.add_metric([name], length)
            yield queue
        except Exception as exc:  # noqa: BLE001 - a scrape never fails on one source
            logger.warning("could not read the Celery queue lengths: %s: %s", type(exc).__name__, exc)
            SCRAPE_ERRORS.labels(source="broker").inc()
        try:
            backlog = embedding_backlog()
        except Exception as exc:  # noqa: BLE001
            logger.warning("could not count the embedding backlog: %s: %s", type(exc).__name__, exc)
            SCRAPE_ERRORS.labels(source="embedding_backlog").inc()
        else:
            yield GaugeMetricFamily("knowhub_embedding_backlog", "Items waiting for their vectors", value=backlog)
