"""Curators' operations over REST and MCP: restore, archive, unmerge, merge review, evolve rollback.

Each caller kind: the owner's token, another agent's token, a curator token (in and out of its
scopes), a person with the curator role, a viewer, a user without a role, and nobody.
"""
import pytest
from rest_framework.test import APIClient

from api.mcp_server import _op, _Refused, _run_sync
from agents.models import AuditEvent
from jobs.models import Job
from knowledge import services, slim
from knowledge.models import Knowledge
from tests.callers import acting, agent_client, agent_key, person_in, session_client
from tests.curation.test_review import proposed
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner():
    return agent_client("research_agent", writable_scopes=["org:acme"])


@pytest.fixture
def peer():
    return agent_client("other_agent", writable_scopes=["org:acme"])


@pytest.fixture
def curator_token():
    return agent_client("librarian", writable_scopes=["org:acme"], can_curate=True)


@pytest.fixture
def far_curator():
    return agent_client("far_librarian", ("org:beta",), writable_scopes=["org:beta"], can_curate=True)


def person(django_user_model, role: str | None, name: str) -> APIClient:
    return session_client(person_in(django_user_model, role, name))


def edited_item():
    item = make_knowledge(task="Rotate keys", content="monthly", owner="agent:research_agent")
    services.knowledge_edit(acting("agent:research_agent"), knowledge_id=item.id, content="weekly")
    return item


def test_the_owner_and_curators_restore_a_version_and_other_agents_may_not(owner, peer, curator_token):
    item = edited_item()
    versions = owner.get(f"/api/knowledge/{item.id}/versions").json()
    assert versions["count"] == 1 and versions["results"][0]["content"] == "monthly"

    refused = peer.post(f"/api/knowledge/{item.id}/restore", {"version": 1}, format="json")
    assert refused.status_code == 403
    restored = curator_token.post(f"/api/knowledge/{item.id}/restore", {"version": 1}, format="json")
    assert restored.status_code == 200 and restored.json()["content"] == "monthly"
    missing = owner.post(f"/api/knowledge/{item.id}/restore", {"version": 9}, format="json")
    assert missing.status_code == 400 and missing.json()["error"]["message"].startswith("version: ")
    # nothing lost: the replaced text is a new version
    assert [v["content"] for v in owner.get(f"/api/knowledge/{item.id}/versions").json()["results"]] == ["weekly", "monthly"]
    assert AuditEvent.objects.filter(operation="knowledge_restore_version", principal="agent:librarian").count() == 1


def test_archive_hides_an_item_from_search_and_activate_brings_it_back(owner, peer):
    item = make_knowledge(task="Export the monthly orders", owner="agent:research_agent")
    assert peer.post(f"/api/knowledge/{item.id}/archive", {}, format="json").status_code == 403

    archived = owner.post(f"/api/knowledge/{item.id}/archive", {"reason": "outdated"}, format="json")
    assert archived.status_code == 200 and archived.json()["status"] == "archived"
    found = owner.get("/api/knowledge/search", {"q": "export monthly orders", "rank": "relevance"}).json()
    assert item.id not in [r["id"] for r in found["results"]]

    assert owner.post(f"/api/knowledge/{item.id}/activate", {}, format="json").json()["status"] == "active"
    Knowledge.objects.filter(pk=item.id).update(status="merged")
    merged = owner.post(f"/api/knowledge/{item.id}/archive", {}, format="json")
    assert merged.status_code == 409 and "unmerge" in merged.json()["error"]["message"]


def test_unmerge_is_for_curators_within_their_scopes(owner, curator_token, far_curator):
    a, b = make_knowledge(task="Tabs please"), make_knowledge(task="Use tabs")
    merged = slim.slim_approve(acting("user:carl"), ids=[a.id, b.id], task="Tabs", content="Indent with tabs")

    refused = owner.post(f"/api/knowledge/{merged.id}/unmerge", format="json")
    assert refused.status_code == 403 and "curator" in refused.json()["error"]["message"]
    assert far_curator.post(f"/api/knowledge/{merged.id}/unmerge", format="json").status_code == 404
    done = curator_token.post(f"/api/knowledge/{merged.id}/unmerge", format="json")
    assert done.status_code == 200 and sorted(done.json()["restored"]) == sorted([a.id, b.id])
    assert Knowledge.objects.get(pk=merged.id).status == "archived"
    again = curator_token.post(f"/api/knowledge/{merged.id}/unmerge", format="json")
    assert again.status_code == 409


def test_merge_review_lists_approves_as_proposed_or_edited_and_rejects(curator_token, far_curator, owner):
    a, b, c, d = (make_knowledge(task=f"tip {n}") for n in range(4))
    proposed(a, b, task="Proposed task", content="Proposed content")
    proposed(c, d)

    assert owner.get("/api/merges").status_code == 403
    assert far_curator.get("/api/merges").json()["count"] == 0  # groups in scopes it cannot see stay hidden
    listed = curator_token.get("/api/merges").json()
    assert listed["count"] == 2

    approved = curator_token.post("/api/merges/approve", {"ids": [a.id, b.id]}, format="json")
    assert approved.status_code == 200 and approved.json()["task"] == "Proposed task"
    rejected = curator_token.post("/api/merges/reject", {"ids": [c.id, d.id]}, format="json")
    assert rejected.status_code == 200 and curator_token.get("/api/merges").json()["count"] == 0

    e, f = make_knowledge(task="tip e"), make_knowledge(task="tip f")
    edited = curator_token.post("/api/merges/approve", {"ids": [e.id, f.id], "task": "Mine", "content": "My text"},
                                format="json")
    assert edited.status_code == 200 and (edited.json()["task"], edited.json()["content"]) == ("Mine", "My text")
    stale = curator_token.post("/api/merges/approve", {"ids": [e.id, f.id], "task": "t", "content": "c"}, format="json")
    assert stale.status_code == 409  # already merged


def test_evolve_rollback_puts_the_old_text_back_for_curators(curator_token, owner):
    item = make_knowledge(task="Rotate keys", content="monthly")
    job = Job.objects.create(kind="evolve", status="succeeded", subject=item.id, requested_by="agent:research_agent")
    services.knowledge_edit(acting(f"job:evolve:{job.id}"), knowledge_id=item.id, content="weekly (evolved)", job=job)
    unchanged = Job.objects.create(kind="evolve", status="failed", subject=item.id, requested_by="agent:research_agent")

    assert owner.post(f"/api/jobs/{job.id}/rollback").status_code == 403
    rolled = curator_token.post(f"/api/jobs/{job.id}/rollback")
    assert rolled.status_code == 200 and rolled.json()["content"] == "monthly"
    assert curator_token.post(f"/api/jobs/{unchanged.id}/rollback").status_code == 409


def test_each_person_kind_gets_the_designed_answer(django_user_model):
    item = edited_item()
    curator = person(django_user_model, "curator", "carl")
    viewer = person(django_user_model, "viewer", "vera")
    no_role = person(django_user_model, None, "nora")

    assert curator.post(f"/api/knowledge/{item.id}/restore", {"version": 1}, format="json").status_code == 200
    assert curator.get("/api/merges").status_code == 200
    assert viewer.get(f"/api/knowledge/{item.id}/versions").status_code == 200
    assert viewer.post(f"/api/knowledge/{item.id}/archive", {}, format="json").status_code == 403
    assert viewer.get("/api/merges").status_code == 403
    assert no_role.get(f"/api/knowledge/{item.id}/versions").status_code == 403
    assert APIClient().get(f"/api/knowledge/{item.id}/versions").status_code == 401
    assert AuditEvent.objects.filter(operation="knowledge_restore_version", principal="user:carl").exists()


@pytest.mark.django_db(transaction=True)  # _run_sync closes connections as a request's end would
def test_curator_operations_over_mcp():
    key = agent_key("librarian", writable_scopes=["org:acme"], can_curate=True)
    plain = agent_key("worker", writable_scopes=["org:acme"])
    a, b = make_knowledge(task="Tabs please"), make_knowledge(task="Use tabs")
    proposed(a, b)

    with pytest.raises(_Refused) as refused:
        _run_sync(plain, _op("merge_proposals"))
    assert refused.value.error["status"] == 403
    assert _run_sync(key, _op("merge_proposals"))["count"] == 1
    merged = _run_sync(key, _op("merge_approve", {"ids": [a.id, b.id]}))
    assert _run_sync(key, _op("knowledge_unmerge", knowledge_id=merged["id"]))["status"] == "archived"


@pytest.mark.parametrize("as_person", [False, True], ids=["curator token", "curator person"])
def test_a_merge_group_names_at_least_two_different_items_each_once(curator_token, django_user_model, as_person):
    from knowledge.models import MergeProposal, SlimRejection

    api = person(django_user_model, "curator", "carl") if as_person else curator_token
    a, b = make_knowledge(task="tip a"), make_knowledge(task="tip b")
    items = Knowledge.objects.count()
    for ids, problem in [([a.id, a.id], "a merge needs at least two different items"),
                         ([a.id, b.id, a.id], f"each item once: {a.id} named more than once")]:
        for action, body in [("approve", {"ids": ids, "task": "copy", "content": "copy"}), ("reject", {"ids": ids})]:
            response = api.post(f"/api/merges/{action}", body, format="json")
            assert response.status_code == 400, (action, ids, response.content)
            assert response.json()["error"]["fields"]["ids"] == [problem]
            assert response.json()["error"]["message"] == f"ids: {problem}"
    assert Knowledge.objects.count() == items and set(Knowledge.objects.values_list("status", flat=True)) == {"active"}
    assert not SlimRejection.objects.exists() and not MergeProposal.objects.exists()


def test_items_in_different_scopes_are_not_merged_into_one_scope(django_user_model):
    """The merged item would take one item's scopes: the other's readers would lose it, and the first's would read
    the other's text, tags and reports."""
    carl = person(django_user_model, "curator", "carl")
    here = make_knowledge(task="Rotate keys", content="monthly", scopes=["team:x"], tags={"domain": "ops"})
    there = make_knowledge(task="Rotate keys", content="weekly", scopes=["team:y"], tags={"secret_project": "y"})

    refused = carl.post("/api/merges/approve", {"ids": [here.id, there.id], "task": "Rotate keys",
                                                "content": "weekly"}, format="json")

    assert refused.status_code == 409 and "ids" in refused.json()["error"]["fields"]
    assert "different scopes" in refused.json()["error"]["message"]
    assert set(Knowledge.objects.values_list("status", flat=True)) == {"active"} and Knowledge.objects.count() == 2
    same = make_knowledge(task="Rotate keys", content="daily", scopes=["team:x"])
    merged = carl.post("/api/merges/approve", {"ids": [here.id, same.id], "task": "Rotate keys", "content": "daily"},
                       format="json")
    assert merged.status_code == 200 and merged.json()["scopes"] == ["team:x"]


def test_a_merged_original_cannot_be_edited_or_evolved_so_unmerge_brings_back_its_text_as_merged(curator_token, settings):
    a, b = make_knowledge(task="Tabs please", content="tabs in Makefiles"), make_knowledge(task="Use tabs")
    merged = slim.slim_approve(acting("user:carl"), ids=[a.id, b.id], task="Tabs", content="Indent with tabs")

    edit = curator_token.patch(f"/api/knowledge/{a.id}", {"content": "patched while merged", "reason": "x"}, format="json")
    assert edit.status_code == 409 and edit.json()["error"]["fields"] == {"knowledge_id": [edit.json()["error"]["message"]]}
    assert merged.id in edit.json()["error"]["message"]
    settings.KNOWHUB_LLM_MODEL, settings.OPENAI_API_KEY = "fake", "x"
    evolve = curator_token.put(f"/api/knowledge/{a.id}", {"evolve_feedback": "make it shorter"}, format="json")
    assert evolve.status_code == 409 and not Job.objects.filter(kind="evolve", subject=a.id).exists()

    curator_token.post(f"/api/knowledge/{merged.id}/unmerge", format="json")
    assert Knowledge.objects.get(pk=a.id).content == "tabs in Makefiles"
    assert curator_token.patch(f"/api/knowledge/{a.id}", {"content": "fine again", "reason": "x"},
                               format="json").status_code == 200


def test_an_archived_item_is_not_evolved(owner, settings):
    item = make_knowledge(task="Export the monthly orders", owner="agent:research_agent")
    owner.post(f"/api/knowledge/{item.id}/archive", {"reason": "outdated"}, format="json")
    settings.KNOWHUB_LLM_MODEL, settings.OPENAI_API_KEY = "fake", "x"
    refused = owner.put(f"/api/knowledge/{item.id}", {"evolve_feedback": "update it", "add_helpful_case": {"n": 1}},
                        format="json")
    assert refused.status_code == 409 and "active" in refused.json()["error"]["message"]
    assert Knowledge.objects.get(pk=item.id).helpful == 0  # the whole request refused, the case too


def test_a_merge_result_merged_again_is_unmerged_from_the_outside_in(curator_token, client, curator):
    a, b, c = (make_knowledge(task=f"Rotate the keys {n}") for n in "abc")
    inner = slim.slim_approve(acting("user:carl"), ids=[a.id, b.id], task="Rotate keys", content="monthly")
    outer = slim.slim_approve(acting("user:carl"), ids=[inner.id, c.id], task="Keys", content="rotate monthly")

    refused = curator_token.post(f"/api/knowledge/{inner.id}/unmerge", format="json")
    assert refused.status_code == 409 and outer.id in refused.json()["error"]["message"]
    client.force_login(curator)
    page = client.post(f"/knowledge/{inner.id}/unmerge/", follow=True)
    assert page.status_code == 200 and outer.id in page.content.decode()
    assert Knowledge.objects.get(pk=inner.id).merged_into_id == outer.id  # nothing changed

    assert curator_token.post(f"/api/knowledge/{outer.id}/unmerge", format="json").status_code == 200
    assert curator_token.post(f"/api/knowledge/{inner.id}/unmerge", format="json").status_code == 200
    assert {k.status for k in Knowledge.objects.filter(pk__in=[a.id, b.id, c.id])} == {"active"}
