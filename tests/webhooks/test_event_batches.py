"""Events written together are announced together: a bulk import's thousands of events cost the webhook fan-out
one query when nobody subscribed; a rolled-back batch announces nothing."""
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


def test_events_of_a_rolled_back_bulk_write_are_never_announced(db, django_capture_on_commit_callbacks):
    seen = []
    events.listen(seen.append)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            try:
                with transaction.atomic():
                    events.emit_all([events.event_new(events.KNOWLEDGE_CREATED, scopes=["org:acme"], data={"n": 1})])
                    raise RuntimeError("the write fails")
            except RuntimeError:
                pass
    finally:
        events.unlisten(seen.append)

    assert seen == []
