"""Write services take the caller: who is recorded comes from it, and its write check holds whoever calls."""
import pytest
from rest_framework.exceptions import PermissionDenied

from agents.caller import Caller
from knowledge import bulk, feedback, services
from knowledge.models import FeedbackCase, Knowledge
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


def agent(writable=("team:a",), principal="agent:writer") -> Caller:
    return Caller(principal=principal, agent_id=principal.split(":")[1], readable_scopes=tuple(writable),
                  writable_scopes=tuple(writable))


def test_a_save_is_owned_by_its_caller_unless_it_names_an_owner():
    mine = services.knowledge_create(agent(), task="t", content="c", types=["tool"], scopes=["team:a"], embed=False)
    named = services.knowledge_create(agent(), task="t", content="c", types=["tool"], scopes=["team:a"], owner="user:bob",
                                      embed=False)
    assert (mine.owner, named.owner) == ("agent:writer", "user:bob")


def test_a_save_to_a_scope_the_caller_may_not_write_is_refused_and_stores_nothing():
    with pytest.raises(PermissionDenied, match="team:b"):
        services.knowledge_create(agent(), task="t", content="c", types=["tool"], scopes=["team:a", "team:b"], embed=False)
    assert not Knowledge.objects.exists()


def test_a_bulk_save_with_one_forbidden_scope_stores_none_of_the_batch():
    entries = [{"task": f"t{n}", "content": "c", "types": ["tool"], "scopes": [scope]}
               for n, scope in enumerate(["team:a", "team:a", "team:b"])]
    with pytest.raises(PermissionDenied, match="team:b"):
        bulk.knowledge_bulk_create(agent(), entries, embed=False)
    assert not Knowledge.objects.exists()


def test_a_viewer_cannot_write_through_a_service_either():
    viewer = Caller(principal="user:vera", agent_id="vera", readable_scopes=None, writable_scopes=None, read_only=True)
    with pytest.raises(PermissionDenied):
        services.knowledge_create(viewer, task="t", content="c", types=["tool"], scopes=["team:a"], embed=False)


def test_an_edit_and_a_feedback_case_record_the_caller():
    item = make_knowledge(embed=False, scopes=["team:a"])
    services.knowledge_edit(agent(principal="agent:editor"), knowledge_id=item.id, content="new text", reason="fix")
    feedback.feedback_record(agent(principal="agent:reporter"), knowledge_id=item.id, helpful=True, case={"n": 1})
    assert item.versions.get().changed_by == "agent:editor"
    case = FeedbackCase.objects.get(knowledge=item)
    assert case.reported_by == case.case["reported_by"] == "agent:reporter"


def test_the_hubs_own_writes_are_recorded_under_their_name():
    item = make_knowledge(embed=False, scopes=["team:a"])
    services.knowledge_edit(Caller.system("job:evolve:42"), knowledge_id=item.id, content="evolved")
    assert item.versions.get().changed_by == "job:evolve:42"
    assert not Caller.system("job:evolve:42").can_read_secrets


def test_archiving_scoring_or_unmerging_an_item_needs_write_access_to_one_of_its_scopes():
    from knowledge import slim

    item = make_knowledge(embed=False, scopes=["team:a"])
    outsider = agent(writable=("team:b",))
    with pytest.raises(PermissionDenied):
        services.knowledge_set_status(outsider, knowledge_id=item.id, status="archived")
    with pytest.raises(PermissionDenied):
        feedback.score_set(outsider, knowledge_id=item.id, score=5)
    with pytest.raises(PermissionDenied):
        slim.knowledge_unmerge(outsider, merged_id=item.id)
    item.refresh_from_db()
    assert (item.status, item.score) == ("active", 3)
    services.knowledge_set_status(agent(), knowledge_id=item.id, status="archived")
    assert Knowledge.objects.get(pk=item.id).status == "archived"


def test_a_refusal_names_the_item_an_item_was_merged_into_only_to_a_caller_who_may_read_it():
    from knowledge import slim
    from knowledge.errors import KnowledgeStateError

    writer = agent(writable=("team:a",))
    first, second = (services.knowledge_create(writer, task=f"Tabs {n}", content="Use tabs", types=["strategy"],
                                               scopes=["team:a"]) for n in (1, 2))
    merged = slim.merge_group(Caller.system("test"), [first.id, second.id], text={"task": "Tabs", "content": "Tabs"})
    with pytest.raises(KnowledgeStateError, match=f"merged into {merged.id}"):
        services.knowledge_edit(writer, knowledge_id=first.id, content="x", reason="r")
    again = slim.merge_group(Caller.system("test"), [merged.id, services.knowledge_create(
        writer, task="Tabs 3", content="Use tabs", types=["strategy"], scopes=["team:a"]).id],
        text={"task": "Tabs!", "content": "Tabs!"})
    with pytest.raises(ValueError, match=f"unmerge {again.id} first"):
        slim.knowledge_unmerge(writer, merged_id=merged.id)

    Knowledge.objects.filter(pk__in=[merged.id, again.id]).update(scopes=["team:b"])  # moved since, by an admin
    Knowledge.objects.filter(pk=first.id).update(scopes=["team:a", "team:b"])
    with pytest.raises(KnowledgeStateError) as refused:
        services.knowledge_edit(writer, knowledge_id=first.id, content="x", reason="r")
    assert merged.id not in str(refused.value) and "merged into another item" in str(refused.value)
    both = agent(writable=("team:a", "team:b"))
    with pytest.raises(ValueError) as unmerging:
        slim.knowledge_unmerge(both, merged_id=merged.id)
    assert again.id in str(unmerging.value)  # one who reads it is told which
    reader_of_a = Caller(principal="agent:a_only", agent_id="a_only", readable_scopes=("team:a", "team:b"),
                         writable_scopes=("team:b",))
    Knowledge.objects.filter(pk=again.id).update(scopes=["team:c"])
    with pytest.raises(ValueError) as hidden:
        slim.knowledge_unmerge(reader_of_a, merged_id=merged.id)
    assert again.id not in str(hidden.value) and "another item" in str(hidden.value)
