import itertools

import pytest

from knowledge import ids
from knowledge.ids import is_knowledge_id, new_knowledge_id
from knowledge.models import Knowledge
from tests.factories import make_knowledge


def test_new_id_has_the_seed_form():
    from datetime import datetime, timezone

    value = new_knowledge_id(now=datetime(2026, 3, 5, tzinfo=timezone.utc))
    assert value.startswith("knowledge-20260305-")
    assert is_knowledge_id(value)
    assert len(value.rsplit("-", 1)[1]) == 4


@pytest.mark.django_db
def test_ten_thousand_inserts_get_unique_well_formed_ids():
    created = [make_knowledge(task=f"task {i}").id for i in range(10_000)]
    assert len(set(created)) == 10_000
    assert all(is_knowledge_id(value) for value in created)
    assert Knowledge.objects.count() == 10_000


@pytest.mark.django_db
def test_a_colliding_random_id_is_drawn_again(monkeypatch):
    first = make_knowledge()
    taken_suffix = first.id.rsplit("-", 1)[1]
    # The first draw repeats the existing id; the next draws are fresh.
    draws = itertools.chain(iter(taken_suffix), itertools.cycle("z9y8"))
    monkeypatch.setattr(ids.secrets, "choice", lambda alphabet: next(draws))
    second = make_knowledge(created_at=first.created_at)
    assert second.id != first.id
    assert second.id.startswith(first.id.rsplit("-", 1)[0])


@pytest.mark.django_db
def test_suffix_grows_when_collisions_repeat(monkeypatch):
    first = make_knowledge()
    monkeypatch.setattr(ids.secrets, "choice", lambda alphabet: "a")
    day = first.created_at
    taken = {make_knowledge(created_at=day).id for _ in range(1)}
    # Every draw of length 4 now collides with "aaaa": the suffix must grow.
    again = make_knowledge(created_at=day)
    assert again.id not in taken | {first.id}
    assert len(again.id.rsplit("-", 1)[1]) == 5


@pytest.mark.django_db
def test_an_item_drawn_again_after_a_collision_gets_its_histories_once_and_the_transaction_goes_on(monkeypatch):
    from django.db import transaction

    from knowledge.models import FeedbackCase

    first = make_knowledge()
    draws = itertools.chain(iter(first.id.rsplit("-", 1)[1]), itertools.cycle("z9y8"))
    monkeypatch.setattr(ids.secrets, "choice", lambda alphabet: next(draws))
    with transaction.atomic():  # a caller's transaction: the collision's rollback leaves it usable
        second = make_knowledge(created_at=first.created_at, helpful_history=[{"task": "worked"}])
        assert Knowledge.objects.filter(pk__in=[first.id, second.id]).count() == 2
    assert list(FeedbackCase.objects.filter(knowledge=second).values_list("case", flat=True)) == [{"task": "worked"}]
    assert not FeedbackCase.objects.filter(knowledge=first).exists()
