"""Merge review: proposals beside their originals; approve (edited), reject (remembered), unmerge."""
import pytest

from jobs.models import Job
from knowledge.models import Knowledge, MergeProposal, SlimRejection
from knowledge.slim import slim_proposals_pending
from tests.conftest import wait_for
from tests.factories import make_knowledge
from tests.knowledge.test_slim import TABS, seed


def proposed(*items, task="Merged task", content="Merged content") -> Job:
    """A finished dry-run slim job and its stored proposal, as the worker leaves them (see test_find_duplicates_...
    for the real run)."""
    from knowledge.slim import store_proposal

    job = Job.objects.create(kind="slim", status="succeeded", requested_by="user:carl",
                             params={"dry_run": True, "model": None, "writable_scopes": None},
                             result={"groups": [{"ids": [i.id for i in items], "proposal": {"task": task, "content": content}}]})
    store_proposal([i.id for i in items], {"task": task, "content": content}, job_id=job.id)
    return job


@pytest.mark.django_db
def test_pending_proposals_leave_once_settled():
    a, b, c, d = (make_knowledge(task=f"item {n}", embed=False) for n in range(4))
    proposed(a, b)
    proposed(c, d)
    proposed(a, b)  # found again by a later job: listed once
    assert sorted(p.ids for p in slim_proposals_pending()) == sorted([sorted([a.id, b.id]), sorted([c.id, d.id])])
    SlimRejection.objects.create(first_id=min(a.id, b.id), second_id=max(a.id, b.id), rejected_by="user:x")
    Knowledge.objects.filter(pk=c.pk).update(status="archived")
    assert slim_proposals_pending() == []


@pytest.mark.django_db
def test_review_shows_the_merged_text_beside_the_originals(viewer_client):
    a, b = make_knowledge(task="Tabs please", embed=False), make_knowledge(task="Use tabs", embed=False)
    proposed(a, b, task="User wants tabs")
    body = viewer_client.get("/review/").content.decode()
    assert "User wants tabs" in body and "Tabs please" in body and "Use tabs" in body
    assert "Approve merge" not in body  # viewers read only


@pytest.mark.django_db
def test_approve_with_an_edited_text_merges(curator_client):
    a, b = make_knowledge(task="Tabs please", helpful=1, embed=False), make_knowledge(task="Use tabs", helpful=2, embed=False)
    proposed(a, b)
    response = curator_client.post("/review/approve/", {"ids": f"{a.id},{b.id}", "task": "Edited task", "content": "Edited content"})
    assert response.status_code == 200 and "Merged into" in response.content.decode()
    merged = Knowledge.objects.get(task="Edited task")
    assert (merged.content, merged.helpful) == ("Edited content", 3)
    assert set(Knowledge.objects.filter(merged_into=merged).values_list("id", flat=True)) == {a.id, b.id}
    assert slim_proposals_pending() == []
    again = curator_client.post("/review/approve/", {"ids": f"{a.id},{b.id}", "task": "x", "content": "y"})
    assert again.status_code == 409 and "no longer active" in again.content.decode()


@pytest.mark.django_db
def test_approve_needs_text_and_two_items(curator_client):
    a, b = make_knowledge(embed=False), make_knowledge(embed=False)
    response = curator_client.post("/review/approve/", {"ids": f"{a.id},{b.id}", "task": "", "content": "c"})
    assert response.status_code == 422 and "task: the merged item needs a task" in response.content.decode()
    response = curator_client.post("/review/reject/", {"ids": a.id})
    assert response.status_code == 422 and "a merge needs at least two items" in response.content.decode()
    assert not Knowledge.objects.filter(status="merged").exists()


@pytest.mark.django_db
def test_reject_is_remembered(curator_client):
    a, b, c = (make_knowledge(task=f"item {n}", embed=False) for n in range(3))
    proposed(a, b, c)
    response = curator_client.post("/review/reject/", {"ids": f"{a.id},{b.id},{c.id}"})
    assert "will not be proposed together again" in response.content.decode()
    assert SlimRejection.objects.count() == 3
    assert "No merge proposals are waiting" in curator_client.get("/review/").content.decode()


@pytest.mark.django_db
def test_unmerge_from_the_merged_items_page(curator_client):
    a, b = make_knowledge(task="Tabs please", embed=False), make_knowledge(task="Use tabs", embed=False)
    proposed(a, b)
    curator_client.post("/review/approve/", {"ids": f"{a.id},{b.id}", "task": "Tabs", "content": "Tabs."})
    merged = Knowledge.objects.get(task="Tabs")
    page = curator_client.get(f"/knowledge/{merged.id}/").content.decode()
    assert "Merged from" in page and "Unmerge</button>" in page
    response = curator_client.post(f"/knowledge/{merged.id}/unmerge/", follow=True)
    assert "are active again" in response.content.decode()
    assert Knowledge.objects.get(pk=merged.pk).status == "archived"
    assert set(Knowledge.objects.filter(status="active").values_list("id", flat=True)) == {a.id, b.id}
    refused = curator_client.post(f"/knowledge/{a.id}/unmerge/", follow=True)
    assert "is not the result of a merge" in refused.content.decode()


@pytest.mark.django_db(transaction=True)
def test_find_duplicates_runs_a_dry_run_job_whose_proposals_appear(curator_client, fake_openai, llm_worker):
    ids = seed(rows=TABS)
    fake_openai.reply_json({"task": "The user prefers tabs", "content": "Tabs and type hints."})
    fake_openai.by_schema["knowledge_relation"] = {"relation": "duplicate", "explanation": "same preference"}
    response = curator_client.post("/review/find/")
    assert response.status_code == 200 and "Slim job" in response.content.decode()
    job = Job.objects.get(kind="slim")
    assert job.params["dry_run"] is True
    wait_for(lambda: Job.objects.get(pk=job.pk).status == "succeeded", timeout=60, message="the slim job")
    status = curator_client.get(f"/jobs/{job.id}/").content.decode()
    assert "Found 1 group" in status and "every 1s" not in status
    review = curator_client.get("/review/").content.decode()
    assert "Tabs and type hints." in review and all(i in review for i in ids)
    assert Knowledge.objects.filter(status="active").count() == 2  # a dry run merges nothing


@pytest.mark.django_db
def test_find_duplicates_without_an_llm_says_how_to_configure_one(curator_client, settings):
    settings.KNOWHUB_LLM_MODEL = ""
    response = curator_client.post("/review/find/")
    assert response.status_code == 409 and "KNOWHUB_LLM_MODEL" in response.content.decode()


@pytest.mark.django_db
def test_proposals_are_stored_records_whose_decisions_are_listed_by_status(curator_client):
    a, b, c, d, e, f = (make_knowledge(task=f"item {n}", embed=False) for n in range(6))
    proposed(a, b, task="As proposed", content="Proposed text")
    proposed(c, d)
    proposed(e, f)
    api = curator_client
    assert api.get("/api/merges").json()["count"] == 3
    api.post("/api/merges/approve", {"ids": [a.id, b.id]}, content_type="application/json")
    api.post("/api/merges/approve", {"ids": [c.id, d.id], "task": "Mine", "content": "My text"}, content_type="application/json")
    api.post("/api/merges/reject", {"ids": [e.id, f.id]}, content_type="application/json")
    assert api.get("/api/merges").json()["count"] == 0
    decided = {s: api.get("/api/merges", {"status": s}).json()["results"] for s in ("approved", "edited", "rejected")}
    assert [p["ids"] for p in decided["approved"]] == [sorted([a.id, b.id])]
    assert decided["approved"][0]["merged_id"] and decided["approved"][0]["decided_by"] == "user:carl"
    assert decided["edited"][0]["proposal"] == {"task": "Merged task", "content": "Merged content"}  # what was proposed
    assert [p["ids"] for p in decided["rejected"]] == [sorted([e.id, f.id])] and decided["rejected"][0]["merged_id"] is None
    assert api.get("/api/merges", {"status": "bogus"}).status_code == 400


def nothing_decided(*items) -> bool:
    """No merge, rejection or decided proposal was written, and `items` are still active."""
    return (not Knowledge.objects.filter(status="merged").exists() and not SlimRejection.objects.exists()
            and not MergeProposal.objects.exclude(status="pending").exists()
            and all(Knowledge.objects.get(pk=i.pk).status == "active" for i in items))


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["approve", "reject"])
@pytest.mark.parametrize("ids, problem", [
    (lambda a, b: ",".join([a.id, b.id] + [f"knowledge-20250101-{n:04d}" for n in range(49)]), "at most 50 items in one merge"),
    (lambda a, b: f"{a.id},{'k' * 41}", "is not an item id (at most 40 characters)"),
], ids=["51 ids", "a 41-character id"])
def test_a_group_past_the_merge_limits_is_refused_in_place_not_a_500(curator_client, action, ids, problem):
    a, b = make_knowledge(task="Tabs please", embed=False), make_knowledge(task="Use tabs", embed=False)
    proposed(a, b)
    response = curator_client.post(f"/review/{action}/", {"ids": ids(a, b), "task": "t", "content": "c"},
                                   HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 422 and "ids: " in body and problem in body
    assert nothing_decided(a, b) and len(slim_proposals_pending()) == 1


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["approve", "reject"])
def test_an_item_is_neither_merged_nor_rejected_with_itself(curator_client, action):
    a, b = make_knowledge(task="Lonely item", embed=False), make_knowledge(task="Other item", embed=False)
    items = Knowledge.objects.count()
    for ids, problem in [(f"{a.id},{a.id}", "a merge needs at least two different items"),
                         (f"{a.id},{b.id},{a.id}", f"each item once: {a.id} named more than once")]:
        response = curator_client.post(f"/review/{action}/", {"ids": ids, "task": "copy", "content": "copy"},
                                       HTTP_HX_REQUEST="true")
        body = response.content.decode()
        assert response.status_code == 422 and f"ids: {problem}" in body and "Merged into" not in body, ids
    assert nothing_decided(a, b) and Knowledge.objects.count() == items  # no one-item "merged" copy


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["approve", "reject"])
def test_an_operations_refusal_the_form_cannot_see_is_said_in_place_and_writes_nothing(curator_client, action):
    """A deployment's filter refusing the decision after it ran: the card says why (422), the write is rolled back."""
    from agents.chain import Continue, Error, Filter, registered_temporarily

    a, b = make_knowledge(task="Tabs please", embed=False), make_knowledge(task="Use tabs", embed=False)
    proposed(a, b)
    frozen = Filter("freeze", "post_invocation", lambda ctx: Error("merges are frozen this week")
                    if ctx["operation"].startswith("merge_") else Continue(ctx))
    with registered_temporarily(frozen):
        response = curator_client.post(f"/review/{action}/", {"ids": f"{a.id},{b.id}", "task": "t", "content": "c"},
                                       HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 422 and "merges are frozen this week" in body and a.id in body
    assert nothing_decided(a, b) and len(slim_proposals_pending()) == 1
