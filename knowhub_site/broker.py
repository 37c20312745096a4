"""The default broker: kombu's SQLAlchemy transport over the app's own PostgreSQL, its publish written by Django.

kombu's channel publishes a message by looking its queue up (a SELECT) and committing an ORM unit of work on an
engine of its own: ~2 ms of CPU per message, a fifth of a save's. When the broker's database is the one Django's
`default` connection uses (the default setup, `settings._broker_from_database`), `Channel._put` writes the same
row, `kombu_message` with the same columns, by one INSERT through the connection the request already holds (the
queue's id read by its name in the same statement). In autocommit the INSERT commits at once, as kombu's own did.
Inside `core.outbox.joining_transaction()` it is part of the transaction Django's connection is in (a
transactional outbox: the message is committed with the write that sent it, or rolled back with it, and costs no
commit of its own; a save's embedding message goes this way, `indexing.embed_with_this_write`); where the broker
is on another database, or the queue has no row yet, that block raises `outbox.CannotJoin` having sent nothing.
Any other publish inside a transaction, or to another database (the tests' broker), goes kombu's own way,
committed at once on kombu's own connection. Consuming (the worker's `_get`) is kombu's, untouched.

The URL scheme `knowhub-sqla+postgresql+psycopg://…` names this transport (registered in `knowhub_site.celery`);
`sqla+…` is kombu's own, as before.

kombu's SQL transport never deletes a message a worker took: it marks the row invisible and keeps it. Every save, edit
and periodic task leaves one behind, so the table grows for as long as the deployment lives. `delivered_forget` (the
beat's hourly `knowhub_site.tasks.forget_delivered_messages`) deletes those taken more than an hour ago.
"""
import datetime
import logging
import threading
from json import dumps

from kombu.transport import sqlalchemy
from sqlalchemy import delete, select, text

from core import outbox

logger = logging.getLogger(__name__)

SCHEME = "knowhub-sqla"
# Which database a connection is on: the name and the server (its start time tells two servers apart).
_IDENTITY_SQL = "SELECT current_database(), pg_postmaster_start_time()"

_lock = threading.Lock()
_shared: dict[str, bool] = {}  # broker URL → whether Django's default connection is on the broker's database


class Channel(sqlalchemy.Channel):
    def _put(self, queue, payload, **kwargs):
        from django.db import connection

        joining = outbox.joining()
        if not (joining or connection.get_autocommit()):
            return super()._put(queue, payload, **kwargs)  # another transaction's publish: committed at once
        if not joining:
            _reconnect_if_broken(connection)
        try:
            if not self._shares_django_database(connection):
                if joining:
                    raise outbox.CannotJoin(f"the broker is not on the database of Django's connection ({queue})")
                return super()._put(queue, payload, **kwargs)
            if self._insert(connection, queue, payload):
                return
            if joining:  # its queue's row is gone: kombu's own way creates it, after the write commits
                raise outbox.CannotJoin(f"no queue {queue} in the broker's table yet")
        finally:
            self._end_session()
        return super()._put(queue, payload, **kwargs)

    def _end_session(self) -> None:
        """End the transaction kombu's session may have begun declaring the queue (a SELECT it never commits), so
        no broker connection stays idle in one (holding a lock on the queues' table)."""
        session = getattr(self, "_session", None)
        if session is not None and session.in_transaction():
            session.rollback()

    def _insert(self, connection, queue: str, payload) -> bool:
        """The message's row, written by Django's connection (in its transaction, if any); False, and nothing
        written, when the queue has no row (kombu's `_get_or_create` makes one). The queue is found by its
        unique name in the same statement, so no id kept by this process can be stale."""
        message, queues = self.message_cls.__table__, self.queue_cls.__table__
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {quote(message.name)} (id, visible, payload, version, queue_id) "
                f"SELECT nextval(%s), true, %s, 1, id FROM {quote(queues.name)} WHERE name = %s",
                [message.c.id.default.name, dumps(payload), queue])
            return cursor.rowcount == 1

    def _shares_django_database(self, connection) -> bool:
        url = self.connection.client.hostname
        if url not in _shared:
            engine, _ = self._open()
            with engine.connect() as broker:
                theirs = tuple(broker.execute(text(_IDENTITY_SQL)).one())
            with connection.cursor() as cursor:
                cursor.execute(_IDENTITY_SQL)
                ours = tuple(cursor.fetchone())
            with _lock:
                _shared[url] = ours == theirs
        return _shared[url]


def _reconnect_if_broken(connection) -> None:
    """Outside a transaction, Django's connection that failed before is checked, and closed when the database has
    dropped it (a restart, a failover, an idle-session timeout), so this publish opens a new one. Requests and tasks
    get this from Django's and Celery's signals; the worker's embedded beat publishes from a thread of its own that
    has neither, and once its connection was dropped every periodic task failed to be sent from then on."""
    if connection.connection is not None and connection.errors_occurred:
        if connection.is_usable():
            connection.errors_occurred = False
        else:
            connection.close()


class Transport(sqlalchemy.Transport):
    """kombu's SQL transport polls its table. While a worker's slots are full it does not look, and then waits
    `polling_interval` before looking again: kombu's default second made short tasks (a save's embedding, 30-80 ms)
    run one a second whatever the backlog. This transport waits `KNOWHUB_BROKER_POLL_MS` (100 ms): an idle worker
    then sends ten indexed SELECTs a second. (Not through Celery's transport options: kombu hands those to
    SQLAlchemy's `create_engine`, which refuses the key.)"""

    Channel = Channel

    def __init__(self, client, **kwargs):
        super().__init__(client, **kwargs)
        from django.conf import settings

        self.polling_interval = settings.KNOWHUB_BROKER_POLL_MS / 1000  # settings refuse less than 10 ms


# A taken message is kept this long (seconds) before `delivered_forget` deletes it.
DELIVERED_KEEP_SECONDS = 3600
# Rows deleted per statement: short transactions beside the workers' polls.
FORGET_BATCH = 5000


def delivered_forget(url: str | None = None, *, keep_seconds: int = DELIVERED_KEEP_SECONDS,
                     batch: int = FORGET_BATCH) -> int:
    """Delete the messages workers took more than `keep_seconds` ago from a SQL broker's table (`url`, default the
    app's broker): how many. kombu never reads a taken (invisible) row again: acknowledgements live in the worker's
    memory, and a message Celery gives back (a lost pool child, a warm shutdown) is written as a new row; one taken
    by a worker killed outright is lost with or without its row (the beat's sweeps cover those: `embed_pending`,
    the jobs' re-send). 0 for Redis, RabbitMQ and any other transport, which delete what is acknowledged themselves,
    and for a SQL broker other than PostgreSQL or SQLite (the batched DELETE is theirs; logged)."""
    from kombu import Connection

    from knowhub_site.celery import app

    with (Connection(url) if url else app.connection_for_write()) as conn:
        if not isinstance(conn.transport, sqlalchemy.Transport):
            return 0
        channel = conn.default_channel
        engine, _ = channel._open()
        if engine.dialect.name not in ("postgresql", "sqlite"):
            logger.warning("taken broker messages are not deleted on %s (PostgreSQL and SQLite only)", engine.dialect.name)
            return 0
        messages = channel.message_cls.__table__
        # kombu stamps a taken row with the worker's local time, without a zone (`onupdate=datetime.now`)
        cutoff = datetime.datetime.now() - datetime.timedelta(seconds=keep_seconds)
        taken = (select(messages.c.id).where(messages.c.visible.is_(False), messages.c.timestamp < cutoff)
                 .limit(batch))
        forgotten = 0
        while True:
            with engine.begin() as db:
                deleted = db.execute(delete(messages).where(messages.c.id.in_(taken))).rowcount
            forgotten += deleted
            if deleted < batch:
                return forgotten
