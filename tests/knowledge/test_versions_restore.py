"""Restoring a version puts its text back and keeps the text it replaces as a new version."""
import pytest

from knowledge.models import KnowledgeVersion
from knowledge.services import knowledge_edit, knowledge_restore_version
from tests.factories import make_knowledge
from tests.callers import acting

pytestmark = pytest.mark.django_db


def test_restore_brings_back_a_version_and_loses_nothing():
    item = make_knowledge(task="v1 task", content="v1 content", tags={"a": "1"}, embed=False)
    knowledge_edit(acting("user:alice"), knowledge_id=item.id, task="v2 task", content="v2 content", tags={"b": "2"})
    restored = knowledge_restore_version(acting("user:bob"), knowledge_id=item.id, number=1)
    assert (restored.task, restored.content, restored.tags) == ("v1 task", "v1 content", {"a": "1"})
    latest = restored.versions.first()
    assert (latest.number, latest.task, latest.changed_by, latest.reason) == (2, "v2 task", "user:bob", "restored version 1")


def test_restoring_a_missing_version_raises():
    item = make_knowledge(embed=False)
    with pytest.raises(KnowledgeVersion.DoesNotExist):
        knowledge_restore_version(acting("user:bob"), knowledge_id=item.id, number=3)
