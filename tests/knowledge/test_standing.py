"""Each item's Standing (its quality and helpful count, kept by triggers) and the curation list's sorts that read it."""
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from curation.browse import knowledge_browse
from knowledge import bulk
from knowledge.feedback import feedback_record, feedback_record_batch, score_set
from knowledge.models import Knowledge, Standing
from tests.callers import acting
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


def standings() -> dict[str, tuple]:
    return {row[0]: row[1:] for row in Standing.objects.values_list("knowledge_id", "quality", "helpful", "created_at")}


def expected() -> dict[str, tuple]:
    """What the application computes (knowledge.quality.QUALITY), which the triggers' SQL must agree with."""
    return {item.id: (item.quality, item.helpful, item.created_at) for item in Knowledge.objects.with_quality()}


def test_every_write_path_keeps_each_items_standing_equal_to_its_own_quality_and_helpful_count():
    first = make_knowledge(task="Rotate proxies", score=4, embed=False)
    second = make_knowledge(task="Retry with backoff", embed=False)
    imported = bulk.knowledge_bulk_create(acting(), [{"task": f"Imported tip {n}", "content": "x", "types": ["tool"],
                                                      "scopes": ["org:acme"], "score": 1 + n % 5} for n in range(7)],
                                          embed=False)
    assert standings() == expected() and len(standings()) == 9
    feedback_record(acting(), knowledge_id=first.id, helpful=True)
    feedback_record(acting(), knowledge_id=second.id, helpful=False)
    with transaction.atomic():
        feedback_record_batch(acting(), [{"knowledge_id": first.id, "helpful": True, "case": None},
                                         {"knowledge_id": imported[0].id, "helpful": False, "case": None}])
    score_set(acting(), knowledge_id=second.id, score=5)
    Knowledge.objects.filter(pk=imported[1].pk).update(helpful=F("helpful") + 3, harmful=1)
    Knowledge.objects.filter(pk=imported[2].pk).update(created_at=timezone.now() - timedelta(days=3))
    Knowledge.objects.filter(pk=imported[3].pk).update(task="Edited: nothing the standing copies")
    Knowledge.objects.filter(pk__in=[imported[4].pk, imported[5].pk]).delete()
    assert standings() == expected() and len(standings()) == 7
    assert standings()[first.id][:2] == (4 + 2, 2)


def test_a_rolled_back_write_leaves_the_standing_as_it_was():
    item = make_knowledge(task="Rotate proxies", embed=False)
    before = standings()
    with pytest.raises(RuntimeError), transaction.atomic():
        feedback_record(acting(), knowledge_id=item.id, helpful=True)
        raise RuntimeError("the request failed after the report")
    assert standings() == before == expected()


@pytest.mark.parametrize("tables", ["knowledge_knowledge", "knowledge_knowledge, knowledge_standing"],
                         ids=["the-items", "both-as-djangos-flush-does"])
def test_truncating_the_items_leaves_no_standing(tables):
    make_knowledge(task="Rotate proxies", embed=False)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the save's deferred checks, pending in the test's transaction
        cursor.execute(f"TRUNCATE {tables} CASCADE")
    assert not Standing.objects.exists()


def test_an_items_standing_is_copied_only_when_what_it_holds_changes():
    item = make_knowledge(task="Rotate proxies", embed=False)
    with connection.cursor() as cursor:
        cursor.execute("SELECT ctid::text FROM knowledge_standing WHERE knowledge_id = %s", [item.id])
        place = cursor.fetchone()[0]  # a rewritten row moves to a new place (ctid), even within one transaction
        Knowledge.objects.filter(pk=item.pk).update(task="Rotate residential proxies", score=item.score)
        cursor.execute("SELECT ctid::text FROM knowledge_standing WHERE knowledge_id = %s", [item.id])
        assert cursor.fetchone()[0] == place
        Knowledge.objects.filter(pk=item.pk).update(content="new words only")
        cursor.execute("SELECT ctid::text FROM knowledge_standing WHERE knowledge_id = %s", [item.id])
        assert cursor.fetchone()[0] == place
        Knowledge.objects.filter(pk=item.pk).update(helpful=F("helpful") + 1)
        cursor.execute("SELECT ctid::text FROM knowledge_standing WHERE knowledge_id = %s", [item.id])
        assert cursor.fetchone()[0] != place


@pytest.mark.parametrize("sort", ["quality", "helpful"])
@pytest.mark.parametrize("filters", [{}, {"scopes": ["org:team"]}, {"status": "archived"}, {"status": "any"}])
def test_the_list_sorted_by_quality_or_helpfulness_is_the_items_own_order(sort, filters):
    now = timezone.now()
    for n in range(40):
        item = make_knowledge(task=f"Tip {n}", scopes=["org:team"] if n % 3 else ["org:acme"], score=1 + n % 5, embed=False)
        Knowledge.objects.filter(pk=item.pk).update(
            helpful=n % 4, harmful=n % 3, created_at=now - timedelta(hours=n % 7),  # ties in quality and in time
            status="archived" if n % 5 == 0 else "active")
    shown = [item.id for item in knowledge_browse(sort=sort, **filters).items]
    items = Knowledge.objects.all()
    if filters.get("scopes"):
        items = items.filter(scopes__overlap=filters["scopes"])
    if filters.get("status") != "any":
        items = items.filter(status=filters.get("status", "active"))
    value = (lambda k: k.quality_score) if sort == "quality" else (lambda k: k.helpful)
    by_id = sorted(items, key=lambda k: k.id)
    ordered = sorted(sorted(by_id, key=lambda k: k.created_at, reverse=True), key=value, reverse=True)
    assert shown == [k.id for k in ordered] and len(shown) > 5
