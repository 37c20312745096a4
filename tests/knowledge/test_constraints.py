"""The database itself refuses bad rows, whatever code writes them."""
import pytest
from django.db import IntegrityError, transaction

from knowledge.models import Knowledge, KnowledgeVersion
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


def valid_row(**overrides) -> dict:
    row = {
        "id": "knowledge-20260305-abcd",
        "types": ["tool"],
        "task": "t",
        "content": "c",
        "scopes": ["org:acme"],
        "owner": "agent:a",
    }
    row.update(overrides)
    return row


def test_a_valid_row_is_accepted():
    Knowledge.objects.create(**valid_row())
    assert Knowledge.objects.filter(pk="knowledge-20260305-abcd").exists()


@pytest.mark.parametrize(
    ("overrides", "constraint"),
    [
        ({"score": 0}, "knowledge_score_1_to_5"),
        ({"score": 6}, "knowledge_score_1_to_5"),
        ({"confidence": 1.01}, "knowledge_confidence_0_to_1"),
        ({"confidence": -0.1}, "knowledge_confidence_0_to_1"),
        ({"types": []}, "knowledge_types_known"),
        ({"types": ["tool", "gossip"]}, "knowledge_types_known"),
        ({"scopes": []}, "knowledge_has_scope"),
        ({"tags": {"domain": 1}}, "knowledge_tags_string_map"),
        ({"tags": {"nested": {"a": "b"}}}, "knowledge_tags_string_map"),
        ({"tags": ["a", "b"]}, "knowledge_tags_string_map"),
        ({"source": ["x"]}, "knowledge_source_object"),
        ({"id": "knowledge-1-abcd"}, "knowledge_id_format"),
        ({"id": "KNOWLEDGE-20260305-ABCD"}, "knowledge_id_format"),
        ({"status": "deleted"}, "knowledge_status_known"),
    ],
)
def test_database_rejects_bad_values(overrides, constraint):
    with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
        Knowledge.objects.create(**valid_row(**overrides))
    assert not Knowledge.objects.exists()


def test_merged_into_requires_merged_status():
    target = make_knowledge()
    with pytest.raises(IntegrityError, match="knowledge_merged_into_only_when_merged"), transaction.atomic():
        Knowledge.objects.create(**valid_row(merged_into=target))
    Knowledge.objects.create(**valid_row(merged_into=target, status="merged"))


def test_negative_counters_are_rejected():
    with pytest.raises(IntegrityError), transaction.atomic():
        Knowledge.objects.create(**valid_row(helpful=-1))


def test_version_numbers_are_unique_per_item():
    item = make_knowledge()
    KnowledgeVersion.objects.create(knowledge=item, number=1, task="a", content="b", changed_by="user:alice")
    with pytest.raises(IntegrityError, match="knowledge_version_number_unique"), transaction.atomic():
        KnowledgeVersion.objects.create(knowledge=item, number=1, task="c", content="d", changed_by="user:alice")
