"""core.fields.ShallowFieldCopies: every input serializer's fields copied cheaply, validating as DRF's deep copies."""
import threading

import pytest
from django.http import QueryDict
from rest_framework import serializers

from knowledge.inputs import KnowledgeCreateInput, KnowledgeUpdateInput, SearchInput
from knowledge.serializers import EvalSerializer, KnowledgeSerializer


def with_drf_copies(cls):
    """The same serializer with DRF's own get_fields (a deep copy of every declared field)."""
    return type(f"Deep{cls.__name__}", (cls,), {"get_fields": serializers.Serializer.get_fields})


def outcome(cls, data):
    serializer = cls(data=data)
    return (serializer.validated_data if serializer.is_valid() else serializer.errors)


@pytest.mark.parametrize("cls, data", [
    (SearchInput, QueryDict("q=retry&top_k=5&types=tool,strategy&explain=1")),
    (SearchInput, QueryDict("q=retry&types=tool,nonsense&explain=yes&top_k=0")),
    (SearchInput, {"q": "retry", "scopes": ["org:acme", ""], "explain": "true", "socre": 3}),
    (SearchInput, {"q": "retry", "filters": {"op": "EQ", "key": "types", "value": "tool"}, "explain": True}),
    (KnowledgeCreateInput, {"task": "t", "content": "c", "types": ["tool"], "tags": {"a": "b"},
                            "source": {"name": "n"}, "eval": {"helpful": 2}}),
    (KnowledgeCreateInput, {"task": "", "content": 3, "types": ["nope"], "tags": {"a": 1}, "source": {"x": 1}}),
    (KnowledgeUpdateInput, {"add_helpful_case": {"outcome": "ok"}, "search_id": "not-a-uuid"}),
    (EvalSerializer, {"helpful": 3, "harmful": -1, "confidence": 2}),
    (KnowledgeSerializer, {"id": "knowledge-20260101-ab12", "task": "t", "content": "c", "types": ["tool"],
                           "eval": {"score": 9}, "tags": {"a": "b"}}),
    (KnowledgeSerializer, {"id": "not-an-id"}),
])
def test_inputs_validate_exactly_as_with_drfs_deep_copies(cls, data):
    assert outcome(cls, data) == outcome(with_drf_copies(cls), data)


def test_each_instance_binds_its_own_copies_and_the_declared_fields_stay_unbound():
    first, second = SearchInput(data={}), SearchInput(data={})
    for name in ("q", "types"):
        assert first.fields[name] is not second.fields[name]
        assert first.fields[name].parent is first and second.fields[name].parent is second
        assert getattr(SearchInput._declared_fields[name], "parent", None) is None  # never bound itself
    assert first.fields["types"].child is not second.fields["types"].child
    assert first.fields["types"].child.parent is first.fields["types"]
    assert first.fields["types"].child.root is first  # a query-string boolean in a list would see its own data


def test_threads_validating_at_once_each_get_their_own_answer():
    answers, failures = {}, []

    def validate(n):
        for _ in range(200):
            data = QueryDict(f"q=question {n}&top_k={n}&explain={n % 2}")
            got = outcome(SearchInput, data)
            if (got["q"], got["top_k"], got["explain"]) != (f"question {n}", n, bool(n % 2)):
                failures.append((n, got))
        answers[n] = True

    threads = [threading.Thread(target=validate, args=(n,)) for n in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 8 and not failures
