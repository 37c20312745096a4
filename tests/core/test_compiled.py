"""core.compiled: a read's SQL compiled once per shape, run with each call's values, giving what the ORM gives."""
import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.compiled import CompiledRead
from knowledge.models import FeedbackCase, Knowledge
from knowledge.selectors import knowledge_with_recent_cases
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


def visible(*, knowledge_id, readable_scopes, limit):
    return knowledge_with_recent_cases(limit=limit).readable_with(readable_scopes).filter(pk=knowledge_id)


def orm_fields(item) -> dict:
    return {name: getattr(item, name) for name in
            ("id", "task", "scopes", "tags", "source", "helpful", "created_at", "linked_resource_ids",
             "supersedes_ids", "recent_helpful", "recent_harmful")}


def test_each_call_runs_with_its_own_values_and_gives_what_the_orm_gives():
    read = CompiledRead(visible)
    a = make_knowledge(scopes=["org:acme"], tags={"k": "v"}, embed=False)
    b = make_knowledge(scopes=["org:beta"], embed=False)
    FeedbackCase.objects.create(knowledge=a, kind="helpful", case={"n": 1})
    for item, scopes in ((a, ("org:acme",)), (b, ("org:beta",)), (a, ("org:beta", "org:acme")), (b, None)):
        (found,) = read(knowledge_id=item.id, readable_scopes=scopes, limit=5)
        assert orm_fields(found) == orm_fields(visible(knowledge_id=item.id, readable_scopes=scopes, limit=5).get())
    assert read(knowledge_id=a.id, readable_scopes=("org:beta",), limit=5) == []  # another scope's item
    assert read(knowledge_id=a.id, readable_scopes=("org:beta", "org:gamma"), limit=5) == []
    assert read(knowledge_id="knowledge-20000101-none", readable_scopes=None, limit=5) == []


def test_the_sql_is_compiled_once_per_shape_and_thread():
    built = []

    def counted(**values):
        built.append(values)
        return visible(**values)

    read = CompiledRead(counted)
    item = make_knowledge(scopes=["org:acme"], embed=False)
    for _ in range(3):
        read(knowledge_id=item.id, readable_scopes=("org:acme",), limit=5)
    read(knowledge_id="knowledge-20000101-none", readable_scopes=("org:beta",), limit=5)  # same shape
    assert len(built) == 1
    read(knowledge_id=item.id, readable_scopes=("org:acme", "org:beta"), limit=5)  # two scopes: another shape
    read(knowledge_id=item.id, readable_scopes=None, limit=5)  # no scope filter
    read(knowledge_id=item.id, readable_scopes=None, limit=None)  # every case: another subquery
    assert len(built) == 4
    def in_another_thread():
        read(knowledge_id=item.id, readable_scopes=None, limit=None)
        connection.close()  # this thread's own connection

    other = threading.Thread(target=in_another_thread)
    other.start()
    other.join()
    assert len(built) == 5
    with CaptureQueriesContext(connection) as captured:
        read(knowledge_id=item.id, readable_scopes=None, limit=None)
    assert len(captured.captured_queries) == 1


def test_a_value_the_orm_does_not_pass_as_a_plain_parameter_is_refused():
    def contains(*, text):
        return Knowledge.objects.filter(task__contains=text)  # the ORM wraps it: %text%

    with pytest.raises(ValueError, match="plain SQL parameters"):
        CompiledRead(contains)(text="deploy")


def test_prefetching_querysets_are_refused():
    with pytest.raises(ValueError, match="prefetch_related"):
        CompiledRead(lambda *, knowledge_id: Knowledge.objects.prefetch_related("feedback_cases")
                     .filter(pk=knowledge_id))(knowledge_id="x")


def test_insert_row_stores_every_field_in_one_statement_and_sets_the_new_primary_key():
    from agents.models import AuditEvent
    from core.compiled import insert_row

    item = make_knowledge(scopes=["org:acme"], embed=False)
    case = FeedbackCase(knowledge=item, kind="harmful", case={"reason": "stale", "n": [1, 2]}, reported_by="agent:a")
    event = AuditEvent(principal="agent:a", operation="knowledge_update", target=item.id, args={"x": {"y": None}})
    with CaptureQueriesContext(connection) as captured:
        assert insert_row(case) is case and insert_row(event) is event
    assert len(captured.captured_queries) == 2
    assert case.pk and event.pk and not case._state.adding
    for obj in (case, event):
        stored = type(obj).objects.get(pk=obj.pk)
        assert [getattr(stored, f.attname) for f in obj._meta.concrete_fields] == [
            getattr(obj, f.attname) for f in obj._meta.concrete_fields]
    given = insert_row(AuditEvent(pk=event.pk + 1000, principal="agent:b", operation="x"))
    assert AuditEvent.objects.get(pk=event.pk + 1000).principal == given.principal == "agent:b"
