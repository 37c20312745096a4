"""An edit says what it was based on (`base_updated_at`): one made from an older state is refused, never a revert."""
import threading

import pytest
from django.db import connection

from agents.caller import Caller
from knowledge import services
from knowledge.errors import KnowledgeStateError
from knowledge.models import Knowledge
from tests.callers import agent_client
from tests.factories import make_knowledge

ITEM = {"task": "Two tabs item", "content": "original content", "types": ["tool"], "scopes": ["org:acme"]}


@pytest.fixture
def owner():
    return agent_client("editor", ["org:acme"])


@pytest.mark.django_db
def test_an_edit_based_on_an_older_state_is_a_409_naming_the_precondition_and_changes_nothing(owner):
    item = owner.post("/api/knowledge", ITEM, format="json").json()
    base = owner.get(f"/api/knowledge/{item['id']}").json()["updated_at"]
    first = owner.patch(f"/api/knowledge/{item['id']}", {"content": "original content + A's fix", "reason": "A",
                                                         "base_updated_at": base}, format="json")
    assert first.status_code == 200, first.content

    stale = owner.patch(f"/api/knowledge/{item['id']}", {"task": "Renamed by B", "content": "original content",
                                                         "reason": "B", "base_updated_at": base}, format="json")

    assert stale.status_code == 409, stale.content
    error = stale.json()["error"]
    assert error["code"] == "conflict" and list(error["fields"]) == ["base_updated_at"]
    assert "changed since you opened it (content;" in error["message"]
    now = owner.get(f"/api/knowledge/{item['id']}").json()
    assert (now["task"], now["content"]) == ("Two tabs item", "original content + A's fix")
    assert Knowledge.objects.get(pk=item["id"]).versions.count() == 1
    redone = owner.patch(f"/api/knowledge/{item['id']}", {"task": "Renamed by B", "reason": "B",
                                                          "base_updated_at": now["updated_at"]}, format="json")
    assert redone.status_code == 200 and redone.json()["content"] == "original content + A's fix"


@pytest.mark.django_db
def test_feedback_since_the_read_also_refuses_a_based_edit_and_says_no_text_changed(owner):
    item = owner.post("/api/knowledge", ITEM, format="json").json()
    assert owner.put(f"/api/knowledge/{item['id']}", {"update_score": 5}, format="json").status_code == 200
    stale = owner.patch(f"/api/knowledge/{item['id']}", {"content": "x", "base_updated_at": item["updated_at"]},
                        format="json")
    assert stale.status_code == 409 and "feedback, score, status or types" in stale.json()["error"]["message"]


@pytest.mark.django_db
def test_an_edit_without_a_base_keeps_the_last_write_wins_and_a_base_alone_is_no_edit(owner):
    item = owner.post("/api/knowledge", ITEM, format="json").json()
    assert owner.patch(f"/api/knowledge/{item['id']}", {"content": "one"}, format="json").status_code == 200
    assert owner.patch(f"/api/knowledge/{item['id']}", {"content": "two"}, format="json").status_code == 200
    alone = owner.patch(f"/api/knowledge/{item['id']}", {"base_updated_at": item["updated_at"], "reason": "r"},
                        format="json")
    assert alone.status_code == 400 and "give at least one of" in alone.json()["error"]["message"]
    assert owner.get(f"/api/knowledge/{item['id']}").json()["content"] == "two"


@pytest.mark.django_db(transaction=True)
def test_of_two_simultaneous_edits_from_one_base_one_lands_and_the_other_is_refused():
    item = make_knowledge(task="Race item", content="base", scopes=["org:acme"], embed=False)
    caller = Caller.system("test:race")
    base = item.updated_at
    start, outcomes = threading.Barrier(2), []

    def edit(content):
        try:
            start.wait()
            services.knowledge_edit(caller, knowledge_id=item.id, content=content, base_updated_at=base)
            outcomes.append("saved")
        except KnowledgeStateError as exc:
            outcomes.append(exc.field)
        finally:
            connection.close()

    threads = [threading.Thread(target=edit, args=(content,)) for content in ("from A", "from B")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["base_updated_at", "saved"]
    assert Knowledge.objects.get(pk=item.id).versions.get().content == "base"  # the winner's version; no second one


@pytest.mark.django_db
def test_the_apis_filter_errors_follow_accept_language_and_stay_english_by_default():
    agent = agent_client("searcher", ["org:acme"])
    body = {"q": "x", "filters": {"op": "EQ", "key": "types"}}
    english = agent.post("/api/knowledge/search", body, format="json")
    chinese = agent.post("/api/knowledge/search", body, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert english.status_code == chinese.status_code == 400
    assert 'EQ takes "op", "key", "value" (missing value)' in english.json()["error"]["message"]
    assert 'EQ 需要 "op", "key", "value"（缺少 value）' in chinese.json()["error"]["message"]
