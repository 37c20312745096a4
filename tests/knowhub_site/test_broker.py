"""The default broker's publish: one INSERT through Django's connection when that is on the broker's database, the
same message kombu's own consumer reads; kombu's own way inside a transaction and for another database."""
import pytest
from django.db import connection, transaction
from kombu import Connection
from kombu.transport import sqlalchemy

from core import outbox
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
    yield
    broker._shared.clear()
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


@pytest.mark.django_db(transaction=True)
def test_a_publish_joining_a_transaction_is_seen_once_it_commits_and_never_if_it_rolls_back(same_database_url):
    with Connection(same_database_url) as producer:
        queue = producer.SimpleQueue(QUEUE)
        queue.put({"n": 0})  # learns the database and the queue's id
        with transaction.atomic():
            with outbox.joining_transaction():
                sent = statements_during(lambda: queue.put({"n": 1}))
            assert len(sent) == 1 and "kombu_message" in sent[0]  # through Django's connection, in its transaction
            assert [m["n"] for m in _received(same_database_url)] == [0]  # kombu's consumer: not yet committed
        assert [m["n"] for m in _received(same_database_url)] == [1]
        with transaction.atomic():
            with outbox.joining_transaction():
                queue.put({"n": 2})
            transaction.set_rollback(True)
        assert _received(same_database_url) == []


@pytest.mark.django_db(transaction=True)
def test_joining_a_transaction_with_a_broker_on_another_database_refuses_before_sending(settings):
    other = settings.CELERY_BROKER_URL  # the tests' own broker database
    with Connection(other) as producer:
        queue = producer.SimpleQueue(QUEUE)
        with transaction.atomic(), outbox.joining_transaction(), pytest.raises(outbox.CannotJoin):
            queue.put({"joined": True})
        assert _received(other) == []


@pytest.mark.django_db(transaction=True)
def test_a_celery_task_sent_joining_a_transaction_reaches_the_queue_with_the_commit(same_database_url):
    from knowhub_site.celery import app
    from knowledge.tasks import embed_knowledge

    with app.connection_for_write(same_database_url) as conn:
        with transaction.atomic():
            with outbox.joining_transaction():
                sent = statements_during(lambda: embed_knowledge.apply_async(
                    (["knowledge-20260101-abcd"],), connection=conn, queue=QUEUE, routing_key=QUEUE))
            assert any("kombu_message" in sql for sql in sent)
            assert _received(same_database_url) == []
    (body,) = _received(same_database_url)
    assert body[0] == [["knowledge-20260101-abcd"]]  # the task's arguments, as the worker reads them


def test_only_the_broker_derived_from_djangos_own_database_is_joined(settings):
    assert not outbox.may_join_transactions()  # the tests' broker is a database of its own
    settings.CELERY_BROKER_URL = _broker_from_database(settings.DATABASE_URL)
    assert outbox.may_join_transactions()
    settings.CELERY_BROKER_URL = _broker_from_database(database_url_for_subprocess() + "_elsewhere")
    assert not outbox.may_join_transactions()
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    assert not outbox.may_join_transactions()


@pytest.mark.django_db(transaction=True)
def test_refused_joins_send_nothing_and_the_broker_keeps_taking_messages(settings):
    other = settings.CELERY_BROKER_URL  # the tests' own broker database
    with Connection(other) as producer:
        queue = producer.SimpleQueue(QUEUE)
        for _ in range(12):  # more than kombu's engine pool holds, were each refusal to keep one
            with transaction.atomic(), outbox.joining_transaction(), pytest.raises(outbox.CannotJoin):
                queue.put({"joined": True})
        queue.put({"after": True})
        assert _received(other) == [{"after": True}]
    from knowledge.tasks import embed_knowledge

    for _ in range(20):  # through Celery's producer pool, as a save would
        with transaction.atomic(), outbox.joining_transaction(), pytest.raises(outbox.CannotJoin):
            embed_knowledge.apply_async((["knowledge-20260101-abcd"],), queue=QUEUE, routing_key=QUEUE)
    embed_knowledge.apply_async((["knowledge-20260101-efgh"],), queue=QUEUE, routing_key=QUEUE)
    assert [body[0] for body in _received(other)] == [[["knowledge-20260101-efgh"]]]


@pytest.fixture
def embedding_messages_to(same_database_url, monkeypatch):
    """Saves' embedding messages sent as with the default broker (on the app's own database, here the test
    database), to QUEUE, where no worker takes them."""
    from knowhub_site.celery import app
    from knowledge.search import indexing
    from knowledge.tasks import embed_knowledge

    failures = []

    def send(batch):
        failure = failures.pop(0) if failures else None  # what each next send does: None succeeds
        if failure:
            raise failure
        embed_knowledge.apply_async((batch,), connection=conn, queue=QUEUE, routing_key=QUEUE)

    monkeypatch.setattr(outbox, "may_join_transactions", lambda: True)
    monkeypatch.setattr(indexing, "_send_embedding", send)
    with app.connection_for_write(same_database_url) as conn:
        yield failures


def _sent_batches(url) -> list[list[str]]:
    return [body[0][0] for body in _received(url)]


@pytest.mark.django_db(transaction=True)
def test_a_saved_item_and_its_embedding_message_commit_together_or_not_at_all(embedding_messages_to, same_database_url):
    from knowledge.models import Knowledge
    from tests.factories import make_knowledge

    with transaction.atomic():
        dropped = make_knowledge(task="Rolled back", content="Never stored.")
        transaction.set_rollback(True)
    assert not Knowledge.objects.filter(pk=dropped.pk).exists() and _sent_batches(same_database_url) == []
    with transaction.atomic():
        kept = make_knowledge(task="Rotate proxies", content="Use a pool of 20 proxies.")
        assert _sent_batches(same_database_url) == []  # not before the item commits
    assert _sent_batches(same_database_url) == [[kept.id]]


@pytest.mark.django_db(transaction=True)
def test_a_publish_failing_in_the_write_is_taken_back_and_every_batch_is_sent_once_after_the_commit(
        embedding_messages_to, same_database_url):
    from knowledge.search import indexing

    ids = [f"knowledge-20260101-{n:04d}" for n in range(indexing.EMBED_BATCH + 8)]  # two batches
    with transaction.atomic():
        indexing.embed_with_this_write(knowledge_ids=["knowledge-20260101-zzzz"])  # another write's, joined
        embedding_messages_to.extend([None, ValueError("not serialisable")])  # the first batch is written, not the second
        indexing.embed_with_this_write(knowledge_ids=ids)
        assert _sent_batches(same_database_url) == []
    assert sorted(_sent_batches(same_database_url)) == sorted(
        [["knowledge-20260101-zzzz"], ids[: indexing.EMBED_BATCH], ids[indexing.EMBED_BATCH :]])


@pytest.mark.django_db(transaction=True)
def test_a_save_whose_queue_row_is_gone_is_kept_and_its_message_sent_after_the_commit(
        embedding_messages_to, same_database_url):
    from knowledge.models import Knowledge
    from tests.factories import make_knowledge

    with transaction.atomic():
        make_knowledge(task="Warm", content="Declares the queue.")
    _received(same_database_url)
    with connection.cursor() as cursor:  # the broker's tables emptied while this process ran
        cursor.execute("DELETE FROM kombu_message WHERE queue_id IN (SELECT id FROM kombu_queue WHERE name = %s)", [QUEUE])
        cursor.execute("DELETE FROM kombu_queue WHERE name = %s", [QUEUE])
    with transaction.atomic():
        kept = make_knowledge(task="Rotate proxies", content="Use a pool of 20 proxies.")
    assert Knowledge.objects.filter(pk=kept.pk).exists()
    assert _sent_batches(same_database_url) == [[kept.id]]  # kombu's own way made the queue again


def test_a_worker_on_the_default_broker_looks_for_messages_every_tenth_of_a_second(settings, same_database_url):
    # kombu's second between looks made a worker whose slots were full run short tasks one a second
    assert settings.KNOWHUB_BROKER_POLL_MS == 100
    with Connection(same_database_url) as conn:
        assert conn.transport.polling_interval == 0.1
    settings.KNOWHUB_BROKER_POLL_MS = 250
    with Connection(same_database_url) as conn:
        assert conn.transport.polling_interval == 0.25
    with Connection(same_database_url.replace(broker.SCHEME + "+", "sqla+", 1)) as conn:  # kombu's own transport
        assert conn.transport.polling_interval == 1.0


@pytest.mark.django_db(transaction=True)
def test_publishing_leaves_no_broker_connection_idle_in_a_transaction(same_database_url):
    from knowhub_site.celery import app
    from knowledge.tasks import embed_knowledge

    def idle_in_transaction() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND state = 'idle in transaction' AND pid <> pg_backend_pid()")
            return cursor.fetchone()[0]

    for _ in range(3):  # a new connection each time: Celery declares the queue on each (kombu's SELECT)
        with app.connection_for_write(same_database_url) as conn:
            embed_knowledge.apply_async((["knowledge-20260101-abcd"],), connection=conn, queue=QUEUE, routing_key=QUEUE)
            assert idle_in_transaction() == 0
    assert len(_received(same_database_url)) == 3


def _rows(queue: str) -> list[tuple[bool, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT visible, payload FROM kombu_message WHERE queue_id IN "
                       "(SELECT id FROM kombu_queue WHERE name = %s) ORDER BY id", [queue])
        return cursor.fetchall()


def _taken_hours_ago(queue: str, hours: int, *, count: int) -> None:
    """The first `count` taken messages of the queue, stamped as taken `hours` ago (kombu's naive local time)."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE kombu_message SET timestamp = timestamp - %s * interval '1 hour' WHERE id IN "
                       "(SELECT id FROM kombu_message WHERE NOT visible AND queue_id IN "
                       "(SELECT id FROM kombu_queue WHERE name = %s) ORDER BY id LIMIT %s)", [hours, queue, count])


@pytest.mark.django_db(transaction=True)
def test_messages_workers_took_over_an_hour_ago_are_deleted_and_nothing_else(same_database_url):
    with Connection(same_database_url) as producer:
        queue = producer.SimpleQueue(QUEUE)
        with connection.cursor() as cursor:  # the other tests' taken messages
            cursor.execute("DELETE FROM kombu_message WHERE queue_id IN (SELECT id FROM kombu_queue WHERE name = %s)",
                           [QUEUE])
        for n in range(4):
            queue.put({"n": n})
        assert [m["n"] for m in _received(same_database_url)] == [0, 1, 2, 3]  # taken: kombu keeps them, invisible
        queue.put({"n": 4})  # waiting
    assert [visible for visible, _ in _rows(QUEUE)] == [False, False, False, False, True]
    _taken_hours_ago(QUEUE, 2, count=3)

    assert broker.delivered_forget(same_database_url, batch=2) == 3  # in two statements
    assert [visible for visible, _ in _rows(QUEUE)] == [False, True]  # the one taken just now and the one waiting
    assert [m["n"] for m in _received(same_database_url)] == [4]  # the waiting message is still delivered
    assert broker.delivered_forget(same_database_url) == 0


def test_forgetting_taken_messages_is_for_sql_brokers_only():
    # Redis and RabbitMQ delete what is acknowledged themselves
    assert broker.delivered_forget("redis://127.0.0.1:6379/15") == 0
    assert broker.delivered_forget("amqp://guest:guest@127.0.0.1:5672//") == 0


def test_the_beat_forgets_taken_messages_every_hour(settings):
    from knowhub_site.tasks import forget_delivered_messages

    (entry,) = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == forget_delivered_messages.name]
    assert entry["schedule"] == 3600.0


def test_taken_messages_are_forgotten_on_a_sqlite_broker_too(tmp_path):
    url = f"sqla+sqlite:///{tmp_path / 'broker.db'}"
    with Connection(url) as producer:
        queue = producer.SimpleQueue(QUEUE)
        queue.put({"n": 1})
        assert [m["n"] for m in _received(url)] == [1]
    assert broker.delivered_forget(url, keep_seconds=-60) == 1  # taken "over a minute ago" by then
    assert broker.delivered_forget(url, keep_seconds=-60) == 0
