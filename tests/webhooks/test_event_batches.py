"""Events written together are announced together: a bulk import's thousands of events cost the webhook fan-out
one query when nobody subscribed, and each still reaches a subscriber that did."""
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from agents.caller import Caller
from core import events
from knowledge.bulk import knowledge_bulk_create

ENTRY = {"task": "Tip", "content": "Restart the worker after a deploy.", "types": ["tool"], "scopes": ["org:acme"]}


def _subscription_queries(queries) -> list[str]:
    return [q["sql"] for q in queries if 'FROM "webhooks_subscription"' in q["sql"]]


def test_a_bulk_save_with_no_subscriptions_asks_for_subscriptions_once(db, django_capture_on_commit_callbacks):
    entries = [{**ENTRY, "task": f"Tip {n}"} for n in range(40)]
    with CaptureQueriesContext(connection) as queries:
        with django_capture_on_commit_callbacks(execute=True):
            knowledge_bulk_create(Caller.system("test"), entries, embed=False)

    assert len(_subscription_queries(queries.captured_queries)) == 1


def test_a_batch_listener_gets_the_events_of_one_emit_many_in_one_call_and_a_plain_one_each(
        db, django_capture_on_commit_callbacks):
    batches, singles = [], []

    def batch_listener(batch):
        batches.append([event.data["n"] for event in batch])

    def single_listener(event):
        singles.append(event.data["n"])

    events.listen(batch_listener, batches=True)
    events.listen(single_listener)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            events.emit_many(events.KNOWLEDGE_CREATED, [(["org:acme"], {"n": n}) for n in range(3)])
            events.emit(events.KNOWLEDGE_UPDATED, scopes=["org:acme"], data={"n": 9})
    finally:
        events.unlisten(batch_listener)
        events.unlisten(single_listener)

    assert batches == [[0, 1, 2], [9]]
    assert singles == [0, 1, 2, 9]


def test_events_of_a_rolled_back_bulk_write_are_never_announced(db, django_capture_on_commit_callbacks):
    seen = []
    events.listen(seen.append, batches=True)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            try:
                with transaction.atomic():
                    events.emit_many(events.KNOWLEDGE_CREATED, [(["org:acme"], {"n": 1})])
                    raise RuntimeError("the write fails")
            except RuntimeError:
                pass
    finally:
        events.unlisten(seen.append)

    assert seen == []
