"""The default broker's publish: one INSERT through Django's connection when that is on the broker's database, the
same message kombu's own consumer reads; kombu's own way inside a transaction and for another database."""
import pytest
from django.db import connection, transaction
from kombu import Connection
from kombu.transport import sqlalchemy

from knowhub_site import broker
from knowhub_site.settings import _broker_from_database
from tests.conftest import database_url_for_subprocess

QUEUE = "test-broker-publish"


def statements_during(publish) -> list[str]:
    sent = []

    def spy(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        publish()
    return sent


@pytest.fixture
def same_database_url():
    """A broker URL on the test database itself, as `make run`'s default is on the app's database."""
    return _broker_from_database(database_url_for_subprocess())


@pytest.fixture(autouse=True)
def _forget_what_processes_learned():
    """Each test learns the databases and queue ids anew, and leaves no engine connected to the test database
    (which would keep it from being dropped at the end of the run)."""
    engines = sqlalchemy.Channel._engines
    before = set(engines)
    broker._shared.clear()
    broker._queue_ids.clear()
    yield
    broker._shared.clear()
    broker._queue_ids.clear()
    for url in set(engines) - before:
        engines.pop(url)[0].dispose()


def _received(url: str) -> list:
    with Connection(url) as consumer:
        queue = consumer.SimpleQueue(QUEUE)
        found = []
        while True:
            try:
                message = queue.get(block=False)
            except queue.Empty:
                return found
            found.append(message.payload)
            message.ack()


@pytest.mark.django_db(transaction=True)
def test_a_publish_outside_a_transaction_is_one_insert_through_djangos_connection(same_database_url):
    with Connection(same_database_url) as producer:
        queue = producer.SimpleQueue(QUEUE)
        queue.put({"n": 0})  # learns the database and the queue's id
        sent = statements_during(lambda: [queue.put({"n": n}) for n in (1, 2)])
        assert len(sent) == 2 and all(sql.startswith("INSERT INTO") and "kombu_message" in sql for sql in sent)
        assert [m["n"] for m in _received(same_database_url)] == [0, 1, 2]  # kombu's own consumer reads them


@pytest.mark.django_db(transaction=True)
def test_kombus_own_transport_reads_what_this_one_wrote(same_database_url):
    with Connection(same_database_url) as producer:
        producer.SimpleQueue(QUEUE).put({"written": "by django"})
    assert _received(same_database_url.replace(broker.SCHEME + "+", "sqla+", 1)) == [{"written": "by django"}]


@pytest.mark.django_db(transaction=True)
def test_a_publish_inside_a_transaction_goes_kombus_way_and_does_not_wait_for_the_commit(same_database_url):
    with Connection(same_database_url) as producer:
        queue = producer.SimpleQueue(QUEUE)
        with transaction.atomic():
            sent = statements_during(lambda: queue.put({"inside": True}))
            assert not any("kombu_message" in sql for sql in sent)
            # committed on kombu's own connection already: a rollback of this transaction does not take it back
            assert _received(same_database_url) == [{"inside": True}]
            transaction.set_rollback(True)


@pytest.mark.django_db(transaction=True)
def test_a_broker_on_another_database_goes_kombus_way(settings):
    other = settings.CELERY_BROKER_URL  # the tests' own broker database
    assert other.startswith(broker.SCHEME + "+")
    with Connection(other) as producer:
        queue = producer.SimpleQueue(QUEUE)
        sent = statements_during(lambda: queue.put({"elsewhere": True}))
        assert not any("kombu_message" in sql for sql in sent)
        assert _received(other) == [{"elsewhere": True}]
