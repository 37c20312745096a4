import copy

import pytest

from knowledge.selectors import knowledge_get
from knowledge.serializers import KnowledgeSerializer
from tests.callers import acting
from tests.factories import SEED_EXAMPLE, make_knowledge, make_resource

pytestmark = pytest.mark.django_db


@pytest.fixture
def seed_resources():
    make_resource("code/selenium/login", content_type="code")
    make_resource("credentials/website_a", content_type="credential", secure_body="账号:user@example.com")


def save(data: dict) -> dict:
    serializer = KnowledgeSerializer(data=data, context={"caller": acting()})
    assert serializer.is_valid(), serializer.errors
    item = serializer.save()
    return KnowledgeSerializer(knowledge_get(knowledge_id=item.id)).data


def test_seed_example_round_trips_exactly(seed_resources):
    out = save(copy.deepcopy(SEED_EXAMPLE))
    assert {key: out[key] for key in SEED_EXAMPLE} == SEED_EXAMPLE
    # ours, and the seed's field from its resource section
    assert set(out) - set(SEED_EXAMPLE) == {"status", "superseded_by", "supersedes", "vector_status", "secure_resource_id"}
    assert (out["status"], out["superseded_by"], out["supersedes"]) == ("active", None, [])


def test_feedback_histories_round_trip_in_order(seed_resources):
    data = copy.deepcopy(SEED_EXAMPLE)
    data["eval"]["helpful_history"] = [
        {"task": "任务描述", "outcome": "成功", "timestamp": "2026-03-05T12:00:00Z"},
        {"task": "second", "outcome": "ok", "timestamp": "2026-03-06T12:00:00Z"},
    ]
    data["eval"]["harmful_history"] = [
        {"task": "任务描述", "outcome": "失败", "reason": "原因", "timestamp": "2026-03-05T12:00:00Z"}
    ]
    out = save(data)
    assert out["eval"] == data["eval"]


def test_resource_order_is_kept(seed_resources):
    data = copy.deepcopy(SEED_EXAMPLE)
    data["resource_ids"] = ["credentials/website_a", "code/selenium/login"]
    assert save(data)["resource_ids"] == ["credentials/website_a", "code/selenium/login"]


def test_minimal_save_fills_the_seed_defaults():
    out = save({"task": "t", "content": "c", "types": ["plan"], "scopes": ["user:bob"], "owner": "agent:x"})
    assert out["id"].startswith("knowledge-")
    assert out["eval"] == {
        "score": 3, "helpful": 0, "harmful": 0, "confidence": 0.5, "helpful_history": [], "harmful_history": []
    }
    assert out["source"]["category"] == "exp"
    assert out["source"]["timestamp"] == out["created_at"]
    assert out["tags"] == {} and out["resource_ids"] == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("types", ["strategy", "opinion"]),
        ("types", []),
        ("scopes", []),
        ("scopes", ["acme"]),
        ("tags", {"domain": 3}),
        ("tags", ["domain"]),
        ("id", "knowledge-2026-a1b2"),
        ("eval", {"score": 6}),
        ("eval", {"confidence": 1.5}),
        ("eval", {"helpful": -1}),
        ("source", {"timestamp": "yesterday"}),
        ("task", ""),
    ],
)
def test_invalid_input_is_rejected_naming_the_field(field, value):
    data = copy.deepcopy(SEED_EXAMPLE)
    data.pop("resource_ids")
    data[field] = value
    serializer = KnowledgeSerializer(data=data)
    assert not serializer.is_valid()
    assert field in serializer.errors


def test_unknown_resource_is_refused_and_nothing_is_written():
    from knowledge.errors import UnknownResourceError
    from knowledge.models import Knowledge

    with pytest.raises(UnknownResourceError) as excinfo:
        make_knowledge(resource_ids=["code/missing"])
    assert excinfo.value.field == "resource_ids"
    assert excinfo.value.missing == ["code/missing"]
    assert Knowledge.objects.count() == 0


def test_saving_an_existing_id_again_is_a_conflict(seed_resources):
    from knowledge.errors import KnowledgeIdConflictError

    save(copy.deepcopy(SEED_EXAMPLE))
    with pytest.raises(KnowledgeIdConflictError):
        make_knowledge(knowledge_id=SEED_EXAMPLE["id"])
