"""What feedback costs: statements per request whatever the history's length, the row lock taken last, and the
PUT reply's bounded histories (GET still shows them all)."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge.models import FeedbackCase
from knowledge.serializers import REPLY_CASES
from tests.factories import make_knowledge
from tests.knowledge.test_api_knowledge import client_for

pytestmark = pytest.mark.django_db

# the token, BEGIN, the item with its reply, the case, the counters, the audit, COMMIT, the webhook listener
MOST_STATEMENTS_PER_PUT = 8


@pytest.fixture
def acme():
    return client_for("research_agent", ["org:acme"])


def item_with_history(cases: int, **fields):
    item = make_knowledge(scopes=["org:acme"], embed=False, **fields)
    FeedbackCase.objects.bulk_create([FeedbackCase(knowledge=item, kind="helpful" if n % 4 else "harmful",
                                                   case={"n": n}) for n in range(cases)])
    return item


def statements(client, method: str, path: str, body) -> list[str]:
    client.get("/api/knowledge")  # the token's first use is written; later ones within a minute are not
    with CaptureQueriesContext(connection) as captured:
        response = getattr(client, method.lower())(path, body, format="json")
    assert response.status_code == 200, response.json()
    return [q["sql"] for q in captured.captured_queries]


@pytest.mark.django_db(transaction=True)  # real commits, and the listeners they call
def test_a_put_runs_the_same_few_statements_however_long_the_history(acme):
    fresh, long = item_with_history(0), item_with_history(400)
    body = {"add_helpful_case": {"outcome": "ok"}}
    on_fresh = statements(acme, "PUT", f"/api/knowledge/{fresh.id}", body)
    on_long = statements(acme, "PUT", f"/api/knowledge/{long.id}", body)
    assert len(on_long) == len(on_fresh) <= MOST_STATEMENTS_PER_PUT, on_long


@pytest.mark.django_db(transaction=True)  # real commits, and the listeners they call
def test_the_counter_update_comes_last_so_the_row_lock_is_held_only_for_the_audit_and_the_commit(acme):
    item = item_with_history(3)
    sql = [s for s in statements(acme, "PUT", f"/api/knowledge/{item.id}", {"add_harmful_case": {"reason": "x"}})
           if s != "BEGIN"]
    locking = next(n for n, s in enumerate(sql) if s.startswith('UPDATE "knowledge_knowledge"'))
    assert [s.split(" (")[0] for s in sql[locking + 1:locking + 3]] == ['INSERT INTO "agents_auditevent"', "COMMIT"]
    assert any(s.startswith('INSERT INTO "knowledge_feedbackcase"') for s in sql[:locking])
    assert sum(s.startswith('SELECT "knowledge_knowledge"') for s in sql) == 1  # the item is read once, before


@pytest.mark.django_db(transaction=True)  # real commits, and the listeners they call
def test_a_batch_runs_the_same_statements_for_two_entries_or_twenty_and_any_history(acme):
    a, b = item_with_history(0), item_with_history(0)
    long_a, long_b = item_with_history(300), item_with_history(300)

    def batch(first, second, entries):
        ids = [first.id, second.id] * (entries // 2)
        return statements(acme, "POST", "/api/knowledge/batch_update", {"feedback_list": [
            {"knowledge_id": kid, "is_helpful": n % 3 > 0, "case": {"n": n}} for n, kid in enumerate(ids)]})

    assert len(batch(a, b, 2)) == len(batch(a, b, 20)) == len(batch(long_a, long_b, 20))


def test_the_put_reply_shows_each_historys_newest_cases_oldest_first_and_says_older_ones_were_left_out(acme):
    item = item_with_history(0)
    FeedbackCase.objects.bulk_create([FeedbackCase(knowledge=item, kind="helpful", case={"n": n})
                                      for n in range(REPLY_CASES + 5)])
    FeedbackCase.objects.create(knowledge=item, kind="harmful", case={"reason": "old"})
    reply = acme.put(f"/api/knowledge/{item.id}", {"add_helpful_case": {"n": "mine"}}, format="json").json()
    evaluation = reply["eval"]
    assert [case["n"] for case in evaluation["helpful_history"]] == [*range(6, REPLY_CASES + 5), "mine"]
    assert evaluation["helpful_history"][-1]["reported_by"] == "agent:research_agent"
    assert [case["reason"] for case in evaluation["harmful_history"]] == ["old"]
    assert evaluation["histories_truncated"] is True
    assert evaluation["helpful"] == 1  # the cases above were stored directly, without a report


def test_a_short_history_comes_back_whole_and_not_truncated_with_the_new_counters_and_score(acme):
    item = item_with_history(2)  # cases 0 (harmful) and 1 (helpful)
    reply = acme.put(f"/api/knowledge/{item.id}", {"add_helpful_case": {"n": 2}, "add_harmful_case": {"n": 3},
                                                   "update_score": 5}, format="json").json()
    evaluation = reply["eval"]
    assert [c["n"] for c in evaluation["helpful_history"]] == [1, 2] and [c["n"] for c in evaluation["harmful_history"]] == [0, 3]
    assert (evaluation["helpful"], evaluation["harmful"], evaluation["score"], evaluation["histories_truncated"]) == (1, 1, 5, False)
    got = acme.get(f"/api/knowledge/{item.id}").json()
    assert {k: v for k, v in reply.items() if k != "eval"} == {k: v for k, v in got.items() if k != "eval"}


def test_get_still_shows_the_whole_history_in_the_seed_shape(acme):
    item = item_with_history(REPLY_CASES + 5)
    acme.put(f"/api/knowledge/{item.id}", {"add_helpful_case": {"n": "mine"}}, format="json")
    evaluation = acme.get(f"/api/knowledge/{item.id}").json()["eval"]
    assert len(evaluation["helpful_history"]) + len(evaluation["harmful_history"]) == REPLY_CASES + 6
    assert set(evaluation) == {"score", "helpful", "harmful", "confidence", "helpful_history", "harmful_history"}


def test_the_put_reply_lists_the_items_resources_and_what_it_supersedes_as_get_does(acme):
    from resources.models import Resource

    Resource.objects.create(id="code/a", title="a", scopes=["org:acme"])
    Resource.objects.create(id="code/b", title="b", scopes=["org:acme"])
    old = make_knowledge(scopes=["org:acme"], embed=False)
    item = make_knowledge(scopes=["org:acme"], embed=False, resource_ids=["code/b", "code/a"])
    type(old).objects.filter(pk=old.pk).update(status="superseded", superseded_by=item)
    reply = acme.put(f"/api/knowledge/{item.id}", {"add_helpful_case": {}}, format="json").json()
    assert (reply["resource_ids"], reply["supersedes"]) == (["code/b", "code/a"], [old.id])
