"""Learning from use: searches are logged, feedback cites them, the ranking is scored on them, logs expire."""
import json
import math
import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from knowledge.feedback import feedback_record
from knowledge.models import FeedbackCase, Knowledge, SearchLog
from knowledge.search_log import (
    EVERY_SCOPE, evaluate, judgments, logged_scopes, search_log_record, search_logs_forget, search_logs_visible_to,
)
from knowledge.tasks import forget_search_logs
from tests.factories import make_knowledge
from tests.knowledge.test_api_knowledge import client_for
from tests.callers import acting

pytestmark = pytest.mark.django_db


def logged(*, scopes, result_ids, query="staging proxy deploy", **fields) -> SearchLog:
    log = search_log_record(principal="agent:research_agent", readable_scopes=scopes, query=query, top_k=5,
                            min_score=3, types=None, scopes=None, rank="quality", filters=None, result_ids=result_ids)
    if fields:
        SearchLog.objects.filter(pk=log.pk).update(**fields)
        log.refresh_from_db()
    return log


def item(task, scopes=("org:acme",)):
    return make_knowledge(task=task, content=task, scopes=list(scopes), embed=False)


@pytest.mark.parametrize(("readable", "requested", "expected"), [
    (["org:acme"], None, ["org:acme"]),
    (["org:acme", "user:bob"], ["user:bob"], ["user:bob"]),
    (["org:acme"], ["org:other"], ["org:acme"]),  # nothing readable was asked for: the readable scopes stand
    (None, None, None),  # a person with a role: every scope
    (None, ["org:acme"], ["org:acme"]),
])
def test_logged_scopes_are_the_readable_ones_narrowed_by_the_request(readable, requested, expected):
    assert logged_scopes(readable_scopes=readable, requested=requested) == expected


def test_search_returns_a_search_id_and_logs_query_parameters_and_results():
    found_item = item("Deploy the staging proxy")
    agent = client_for("research_agent", ["org:acme", "user:bob"])
    body = agent.get("/api/knowledge/search", {"q": "staging proxy", "top_k": 3, "scopes": "org:acme",
                                               "filters": '{"op": "EQ", "key": "types", "value": "tool"}'}).json()
    log = SearchLog.objects.get(pk=body["search_id"])
    assert [r["id"] for r in body["results"]] == log.result_ids == [found_item.id]
    assert (log.principal, log.query, log.scopes) == ("agent:research_agent", "staging proxy", ["org:acme"])
    assert log.parameters == {"top_k": 3, "min_score": 3, "types": [], "scopes": ["org:acme"], "rank": "quality",
                              "filters": {"op": "AND", "conditions": [{"op": "EQ", "key": "types", "value": "tool"}]}}
    post = agent.post("/api/knowledge/search", {"q": "staging proxy"}, format="json").json()
    assert post["search_id"] != body["search_id"] and SearchLog.objects.count() == 2


def synchronous_commit() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_search_log_is_committed_without_waiting_for_the_disk_and_later_writes_still_wait():
    from django.test.utils import CaptureQueriesContext
    from django.db import connection

    with CaptureQueriesContext(connection) as queries:
        log = logged(scopes=["org:acme"], result_ids=["knowledge-20260101-abcd"])
    statements = [q["sql"] for q in queries.captured_queries]
    assert len(statements) == 1  # one round trip: the setting and the INSERT in one statement, its own transaction
    assert statements[0].startswith("WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)) INSERT")
    stored = SearchLog.objects.get(pk=log.pk)
    assert [(f.name, getattr(stored, f.attname)) for f in SearchLog._meta.concrete_fields] == [
        (f.name, getattr(log, f.attname)) for f in SearchLog._meta.concrete_fields]
    assert stored.result_ids == ["knowledge-20260101-abcd"] and stored.parameters["top_k"] == 5
    assert synchronous_commit() == "on"  # only the log's own transaction: the next write waits for the disk


@pytest.mark.django_db(transaction=True)
def test_a_scope_too_long_for_its_column_is_refused_not_cut_short_by_the_one_statement_log():
    from django.db import DataError

    with pytest.raises(DataError):
        logged(scopes=["org:" + "x" * 300], result_ids=[])
    assert not SearchLog.objects.exists()


def test_a_search_log_inside_a_callers_transaction_leaves_that_transactions_durability_alone():
    logged(scopes=["org:acme"], result_ids=[])  # pytest-django's test transaction stands for a caller's
    assert synchronous_commit() == "on"


def test_feedback_with_a_search_id_links_the_case_to_the_search():
    found_item = item("Deploy the staging proxy")
    agent = client_for("research_agent", ["org:acme"])
    search_id = agent.get("/api/knowledge/search", {"q": "staging proxy"}).json()["search_id"]
    response = agent.put(f"/api/knowledge/{found_item.id}", {"add_helpful_case": {"outcome": "ok"},
                                                             "search_id": search_id}, format="json")
    assert response.status_code == 200, response.json()
    batch = agent.post("/api/knowledge/batch_update", {"feedback_list": [
        {"knowledge_id": found_item.id, "is_helpful": False, "search_id": search_id}]}, format="json").json()
    assert batch["succeeded"] == 1
    cases = FeedbackCase.objects.filter(knowledge=found_item).order_by("id")
    assert [(c.kind, str(c.search_id)) for c in cases] == [("helpful", search_id), ("harmful", search_id)]


def test_search_id_alone_is_not_feedback():
    found_item = item("Deploy the staging proxy")
    agent = client_for("research_agent", ["org:acme"])
    search_id = agent.get("/api/knowledge/search", {"q": "staging proxy"}).json()["search_id"]
    response = agent.put(f"/api/knowledge/{found_item.id}", {"search_id": search_id}, format="json")
    assert response.status_code == 400 and "search_id" not in response.json()["error"]["message"]


@pytest.mark.parametrize("kind", ["other_org", "unknown", "malformed"])
def test_feedback_citing_a_search_the_caller_cannot_see_is_400_naming_search_id(kind):
    acme_search = client_for("research_agent", ["org:acme"]).get("/api/knowledge/search", {"q": "x"}).json()["search_id"]
    search_id = {"other_org": acme_search, "unknown": str(uuid.uuid4()), "malformed": "not-a-uuid"}[kind]
    own = item("Rotate the keys", scopes=["org:other"])
    spy = client_for("spy", ["org:other"])
    response = spy.put(f"/api/knowledge/{own.id}", {"add_helpful_case": {}, "search_id": search_id}, format="json")
    assert response.status_code == 400 and list(response.json()["error"]["fields"]) == ["search_id"]
    batch = spy.post("/api/knowledge/batch_update", {"feedback_list": [
        {"knowledge_id": own.id, "is_helpful": True, "search_id": search_id}]}, format="json").json()
    assert batch["failed"] == 1 and "search_id" in batch["results"][0]["error"]["fields"]
    assert not FeedbackCase.objects.exists() and Knowledge.objects.get(pk=own.pk).helpful == 0


def test_other_org_cannot_tell_another_scopes_search_from_an_unknown_one():
    acme_search = client_for("research_agent", ["org:acme"]).get("/api/knowledge/search", {"q": "x"}).json()["search_id"]
    own = item("Rotate the keys", scopes=["org:other"])
    spy = client_for("spy", ["org:other"])
    answers = [spy.put(f"/api/knowledge/{own.id}", {"add_helpful_case": {}, "search_id": sid}, format="json").json()
               for sid in (acme_search, str(uuid.uuid4()))]
    assert answers[0] == answers[1]


def test_logs_are_visible_to_readers_of_one_of_their_scopes_and_people_see_all():
    acme, shared, people = (logged(scopes=["org:acme"], result_ids=[]), logged(scopes=["org:acme", "org:beta"], result_ids=[]),
                            logged(scopes=None, result_ids=[]))
    assert set(search_logs_visible_to(readable_scopes=["org:beta"])) == {shared}
    assert set(search_logs_visible_to(readable_scopes=["org:acme"])) == {acme, shared}
    assert set(search_logs_visible_to(readable_scopes=[])) == set()
    assert set(search_logs_visible_to(readable_scopes=None)) == {acme, shared, people}


def test_judgments_count_helpful_cases_and_mark_harmful_items_not_relevant():
    a, b, c = item("a thing"), item("b thing"), item("c thing")
    log = logged(scopes=["org:acme"], result_ids=[a.id, b.id, c.id])
    for knowledge_id, helpful in [(a.id, False), (b.id, True), (b.id, True), (c.id, True), (c.id, False)]:
        feedback_record(acting(), knowledge_id=knowledge_id, helpful=helpful, search_id=log.pk)
    assert judgments(log) == {a.id: 0, b.id: 2, c.id: 0}


@pytest.fixture
def judged():
    """org:acme: one search judged [A harmful, B helpful], one judged only harmful; org:beta: [E, F, G] with G helpful.

    Acme's first query now finds only B (A was archived since), so its ranking now is perfect.
    """
    a, b, c = item("Deploy the staging proxy with docker"), item("Deploy the staging proxy with ansible"), item("Brew coffee")
    first = logged(scopes=["org:acme"], result_ids=[a.id, b.id, c.id])
    feedback_record(acting(), knowledge_id=a.id, helpful=False, search_id=first.pk)
    feedback_record(acting(), knowledge_id=b.id, helpful=True, search_id=first.pk)
    Knowledge.objects.filter(pk=a.pk).update(status="archived")
    only_harmful = logged(scopes=["org:acme"], result_ids=[c.id], query="coffee")
    feedback_record(acting(), knowledge_id=c.id, helpful=False, search_id=only_harmful.pk)
    e, f, g = (item(f"{name} beta runbook", scopes=["org:beta"]) for name in ("Eggs", "Figs", "Grapes"))
    beta = logged(scopes=["org:beta"], result_ids=[e.id, f.id, g.id], query="beta runbook")
    feedback_record(acting(), knowledge_id=g.id, helpful=True, search_id=beta.pk)
    logged(scopes=["org:acme"], result_ids=[b.id])  # never judged: not counted


def test_evaluate_reports_ndcg_and_mrr_per_scope_as_logged_and_now(judged):
    reports = {r.scope: r for r in evaluate()}
    assert set(reports) == {"org:acme", "org:beta"}
    acme, beta = reports["org:acme"], reports["org:beta"]
    # acme: B (gain 1) at rank 2 → DCG 1/log2(3), ideal 1/log2(2) = 1; the only-harmful search is judged, not averaged
    assert (acme.judged, acme.relevant) == (2, 1)
    assert acme.ndcg_logged == pytest.approx(1 / math.log2(3)) and acme.ndcg_logged == pytest.approx(0.6309, abs=1e-4)
    assert acme.mrr_logged == pytest.approx(0.5)
    assert (acme.ndcg_now, acme.mrr_now) == (pytest.approx(1.0), pytest.approx(1.0))  # only B matches now
    # beta: G at rank 3 → 1/log2(4) = 0.5; MRR 1/3
    assert (beta.judged, beta.relevant) == (1, 1)
    assert beta.ndcg_logged == pytest.approx(0.5) and beta.mrr_logged == pytest.approx(1 / 3)


def test_another_orgs_agent_never_sees_a_scopes_searches_in_the_eval(judged):
    assert evaluate(readable_scopes=["org:other"]) == []
    assert [r.scope for r in evaluate(readable_scopes=["org:beta"], rerun=False)] == ["org:beta"]


def test_a_shared_search_counts_only_under_the_scopes_the_caller_reads():
    b = item("Deploy the staging proxy", scopes=["org:acme", "org:beta"])
    shared = logged(scopes=["org:acme", "org:beta"], result_ids=[b.id])
    feedback_record(acting(), knowledge_id=b.id, helpful=True, search_id=shared.pk)
    assert [r.scope for r in evaluate(rerun=False)] == ["org:acme", "org:beta"]
    assert [r.scope for r in evaluate(readable_scopes=["org:beta"], rerun=False)] == ["org:beta"]


def test_people_searches_are_reported_under_every_scope():
    b = item("Deploy the staging proxy")
    log = logged(scopes=None, result_ids=[b.id])
    feedback_record(acting(), knowledge_id=b.id, helpful=True, search_id=log.pk)
    [report] = evaluate(rerun=False)
    assert (report.scope, report.ndcg_logged) == (EVERY_SCOPE, 1.0)
    assert evaluate(readable_scopes=["org:acme"], rerun=False) == []


# (result ids by letter, feedback as (letter, helpful), Monday of its week): the cases the metrics' definitions turn on
TREND_CASES = [
    ("abc", [("b", True)], "2026-03-02"),  # helpful at rank 2
    ("ab", [("a", False)], "2026-03-02"),  # only harmful: judged, not averaged
    ("abc", [("c", True), ("c", True), ("a", True), ("b", False)], "2026-03-02"),  # gains 2 and 1 in the wrong order
    ("abcdefghijkl", [("k", True)], "2026-03-09"),  # helpful at rank 11: relevant, but 0 within the first ten
    ("ab", [("z", True)], "2026-03-09"),  # helpful item the search did not return
    ("abcdefghijkl", [(x, True) for x in "lkjihgfedcba"], "2026-03-09"),  # twelve judged: the ideal keeps ten
    ("abc", [("a", True), ("a", False)], "2026-03-16"),  # helpful and harmful cancel: gain 0
    ("cba", [("a", True), ("b", True)], "2026-03-16"),
    ("abc", [("a", False), ("b", True)], "2026-03-16"),  # the first judged is not the first helpful
]


def test_weekly_trend_scores_each_week_as_the_python_metrics_do():
    from datetime import date, datetime

    from knowledge.search.metrics import mean, mrr_at_k, ndcg_at_k
    from knowledge.search_log import weekly_trend

    items = {letter: item(f"item {letter}") for letter in "abcdefghijklz"}
    weeks = {}
    for n, (ranked, feedback, monday) in enumerate(TREND_CASES):
        at = timezone.make_aware(datetime.fromisoformat(monday)) + timedelta(days=n % 7, hours=n)
        log = logged(scopes=["org:acme"], result_ids=[items[x].id for x in ranked], created_at=at)
        for letter, helpful in feedback:
            feedback_record(acting(), knowledge_id=items[letter].id, helpful=helpful, search_id=log.pk)
        weeks.setdefault(monday, []).append((log.result_ids, judgments(log)))
    logged(scopes=["org:acme"], result_ids=[items["a"].id])  # never judged: not counted
    expected = []
    for monday, judged in weeks.items():
        useful = [(ranked, gains) for ranked, gains in judged if any(gains.values())]
        year, week, _ = date.fromisoformat(monday).isocalendar()
        expected.append({"week": f"{year}-W{week:02d}", "starts": date.fromisoformat(monday), "judged": len(judged),
                         "relevant": len(useful), "ndcg": pytest.approx(mean([ndcg_at_k(r, g) for r, g in useful])),
                         "mrr": pytest.approx(mean([mrr_at_k(r, g) for r, g in useful]))})
    assert weekly_trend() == expected
    assert [w["relevant"] for w in expected] == [2, 3, 2]
    assert weekly_trend(readable_scopes=["org:beta"]) == []  # as visible as the logs themselves
    assert [w["week"] for w in weekly_trend(since=timezone.make_aware(datetime(2026, 3, 16)))] == ["2026-W12"]


def test_ranking_eval_prints_a_table_per_scope(judged):
    out = StringIO()
    call_command("ranking_eval", stdout=out)
    lines = out.getvalue().splitlines()
    acme = next(line for line in lines if line.startswith("org:acme")).split()
    assert acme == ["org:acme", "2", "1", "0.631", "1.000", "+0.369", "0.500", "1.000", "+0.500"]
    beta = next(line for line in lines if line.startswith("org:beta")).split()
    assert beta[:4] == ["org:beta", "1", "1", "0.500"] and beta[6] == "0.333"


def test_ranking_eval_filters_by_scope_and_age(judged):
    out = StringIO()
    call_command("ranking_eval", "--scope", "org:beta", stdout=out)
    assert "org:beta" in out.getvalue() and "org:acme" not in out.getvalue()
    SearchLog.objects.update(created_at=timezone.now() - timedelta(days=10))
    out = StringIO()
    call_command("ranking_eval", "--since-days", "7", stdout=out)
    assert out.getvalue().startswith("No judged searches yet")


def test_ranking_eval_says_when_there_are_no_judgments_yet():
    logged(scopes=["org:acme"], result_ids=[])
    out = StringIO()
    call_command("ranking_eval", stdout=out)
    assert "No judged searches yet" in out.getvalue() and "search_id" in out.getvalue()


def test_retention_deletes_old_logs_and_keeps_their_feedback(settings):
    settings.KNOWHUB_SEARCH_LOG_RETENTION_DAYS = 30
    b = item("Deploy the staging proxy")
    old = logged(scopes=["org:acme"], result_ids=[b.id], created_at=timezone.now() - timedelta(days=31))
    recent = logged(scopes=["org:acme"], result_ids=[b.id], created_at=timezone.now() - timedelta(days=29))
    feedback_record(acting(), knowledge_id=b.id, helpful=True, search_id=old.pk)
    assert forget_search_logs() == 1
    assert list(SearchLog.objects.all()) == [recent]
    case = FeedbackCase.objects.get()
    assert case.search_id is None and case.knowledge_id == b.id
    assert Knowledge.objects.get(pk=b.pk).helpful == 1


def test_retention_period_is_a_setting(settings):
    settings.KNOWHUB_SEARCH_LOG_RETENTION_DAYS = 3
    logged(scopes=["org:acme"], result_ids=[], created_at=timezone.now() - timedelta(days=4))
    assert search_logs_forget() == 1 and not SearchLog.objects.exists()


def test_feedback_citing_an_expired_search_is_400():
    found_item = item("Deploy the staging proxy")
    agent = client_for("research_agent", ["org:acme"])
    search_id = agent.get("/api/knowledge/search", {"q": "staging proxy"}).json()["search_id"]
    SearchLog.objects.update(created_at=timezone.now() - timedelta(days=31))
    search_logs_forget()
    response = agent.put(f"/api/knowledge/{found_item.id}", {"add_helpful_case": {}, "search_id": search_id}, format="json")
    assert response.status_code == 400 and "search_id" in response.json()["error"]["fields"]


def test_curation_ui_searches_are_not_logged(client, curator):
    item("Deploy the staging proxy")
    client.force_login(curator)
    assert client.get("/knowledge/", {"q": "staging proxy"}).status_code == 200
    assert not SearchLog.objects.exists()


def test_the_rerun_sees_only_the_logged_scopes_and_filters():
    from knowledge.search.filters import parse_filter
    from knowledge.search_log import ranked_now

    mine = item("Deploy the staging proxy")
    item("Deploy the staging proxy today", scopes=["org:beta"])
    make_knowledge(task="Deploy the staging proxy by hand", content="x", types=["plan"], scopes=["org:acme"], embed=False)
    log = logged(scopes=["org:acme"], result_ids=[mine.id])
    SearchLog.objects.filter(pk=log.pk).update(parameters={
        **log.parameters, "filters": parse_filter({"op": "EQ", "key": "types", "value": "tool"}).to_dict()})
    log.refresh_from_db()
    assert ranked_now(log) == [mine.id]


def stored_bytes(log: SearchLog) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_size(parameters) FROM knowledge_searchlog WHERE id = %s", [log.pk])
        return cursor.fetchone()[0]


def test_a_search_with_a_filter_of_a_megabyte_logs_a_bounded_row_saying_it_is_truncated():
    from knowledge.search_log import LOGGED_FILTERS_MAX, ranked_now

    item("Deploy the staging proxy")
    values = [f"{n:0>500}" for n in range(100)]  # the filter parser's limits: 100 values of 500 characters
    huge = {"op": "OR", "conditions": [{"op": "IN", "key": f"tags.k{n}", "value": values} for n in range(20)]}
    agent = client_for("research_agent", ["org:acme"])
    response = agent.post("/api/knowledge/search", {"q": "staging proxy", "filters": huge, "min_score": 1},
                          format="json")
    assert response.status_code == 200, response.content[:300]
    log = SearchLog.objects.get(pk=response.json()["search_id"])
    assert log.parameters == {"top_k": 5, "min_score": 1, "types": [], "scopes": [], "rank": "quality",
                              "filters": None, "truncated": True}
    assert stored_bytes(log) < 1_000 and ranked_now(log) == []  # not re-run as the unfiltered search it is not
    small = agent.post("/api/knowledge/search", {"q": "staging proxy", "filters": {**huge, "conditions": [
        {"op": "IN", "key": "tags.k", "value": values[:20]}]}}, format="json").json()
    kept = SearchLog.objects.get(pk=small["search_id"]).parameters
    assert "truncated" not in kept and len(json.dumps(kept["filters"])) < LOGGED_FILTERS_MAX


def test_a_log_keeps_at_most_fifty_names_of_types_and_scopes_of_at_most_200_characters():
    from knowledge.search_log import logged_parameters

    kept = logged_parameters(top_k=5, min_score=3, types=["tool"] * 60, scopes=["org:" + "x" * 1_000] * 12_000,
                             rank="quality", filters=None)
    assert kept["types"] == ["tool"] * 50 and kept["scopes"] == ["org:" + "x" * 196] * 50 and kept["truncated"] is True
    assert "truncated" not in logged_parameters(top_k=5, min_score=3, types=["tool"], scopes=["org:acme"],
                                                rank="quality", filters=None)
