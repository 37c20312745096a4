"""The default broker: kombu's SQLAlchemy transport over the app's own PostgreSQL, its publish written by Django.

kombu's channel publishes a message by looking its queue up (a SELECT) and committing an ORM unit of work on an
engine of its own: ~2 ms of CPU per message, a fifth of a save's. When the broker's database is the one Django's
`default` connection uses (the default setup, `settings._broker_from_database`), `Channel._put` writes the same
row, `kombu_message` with the same columns, by one INSERT through the connection the request already holds; the
queue's id is looked up once per process. Only in autocommit, as `transaction.on_commit` runs a save's publish:
the INSERT commits at once, as kombu's own did. A publish inside a transaction, or to another database (the tests'
broker), goes kombu's own way. Consuming (the worker's `_get`) is kombu's, untouched.

The URL scheme `knowhub-sqla+postgresql+psycopg://…` names this transport (registered in `knowhub_site.celery`);
`sqla+…` is kombu's own, as before.
"""
import threading
from json import dumps

from kombu.transport import sqlalchemy
from sqlalchemy import text

SCHEME = "knowhub-sqla"
# Which database a connection is on: the name and the server (its start time tells two servers apart).
_IDENTITY_SQL = "SELECT current_database(), pg_postmaster_start_time()"

_lock = threading.Lock()
_shared: dict[str, bool] = {}  # broker URL → whether Django's default connection is on the broker's database
_queue_ids: dict[tuple[str, str], int] = {}  # (broker URL, queue name) → kombu_queue.id


class Channel(sqlalchemy.Channel):
    def _put(self, queue, payload, **kwargs):
        from django.db import connection

        if not connection.get_autocommit() or not self._shares_django_database(connection):
            return super()._put(queue, payload, **kwargs)
        table = self.message_cls.__table__
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {quote(table.name)} (id, visible, payload, version, queue_id) "
                f"VALUES (nextval(%s), true, %s, 1, %s)",
                [table.c.id.default.name, dumps(payload), self._queue_id(queue)])

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

    def _queue_id(self, queue: str) -> int:
        key = (self.connection.client.hostname, queue)
        if key not in _queue_ids:
            try:
                found = self._get_or_create(queue).id
            finally:
                self.session.commit()  # ends the session's transaction: no connection left idle in one
            with _lock:
                _queue_ids[key] = found
        return _queue_ids[key]


class Transport(sqlalchemy.Transport):
    Channel = Channel
