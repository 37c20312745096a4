"""Slim: near-duplicates merged by the real worker with a loopback LLM; reversible."""
import pytest

from knowledge.models import Knowledge, MergeProposal
from knowledge.search.indexing import embed_items
from knowledge.slim import find_groups, knowledge_unmerge, slim_reject
from tests.conftest import wait_for
from tests.factories import make_knowledge
from tests.knowledge.test_api_knowledge import client_for
from tests.callers import acting

DUPLICATES = [
    ("Log in to site A with Selenium", "Use undetected_chromedriver to avoid bot detection, add random delays."),
    ("Logging in to site A using Selenium", "undetected_chromedriver avoids the bot detection; also wait a random time between actions."),
    ("Selenium login for site A", "To not get flagged as a bot use undetected_chromedriver and random pauses."),
]
TABS = [
    ("User prefers tabs", "The user wants tabs for indentation and type hints in Python."),
    ("Indentation preference of the user", "This user likes tab indentation and Python type annotations."),
]
OTHERS = [
    ("Scrape site A with requests", "Use a session with the exported cookies, rotate proxies."),
    ("Reconcile invoices", "Export the ledger as CSV and match invoice numbers."),
]


def seed(scopes=("org:acme",), owner="agent:research_agent", rows=DUPLICATES + TABS + OTHERS, **extra):
    items = [make_knowledge(task=t, content=c, scopes=list(scopes), owner=owner, embed=False, **extra) for t, c in rows]
    embed_items(items=items)
    return [i.id for i in items]


@pytest.mark.django_db
def test_near_duplicates_are_grouped_and_different_items_are_not():
    ids = seed()
    assert find_groups() == sorted([sorted(ids[:3]), sorted(ids[3:5])], key=lambda g: g[0])


@pytest.mark.django_db
def test_groups_never_cross_scopes_but_join_the_same_advice_saved_by_two_agents():
    acme = seed(rows=DUPLICATES[:1])
    other_org = seed(scopes=("org:other",), rows=DUPLICATES[1:2])
    assert find_groups() == []
    both = seed(scopes=("org:acme", "org:other"), rows=DUPLICATES[1:2])
    assert find_groups() == []  # same text, but a merge would widen who sees the acme item
    assert other_org and both
    other_owner = seed(owner="agent:someone_else", rows=DUPLICATES[2:3])
    assert find_groups() == [sorted(acme + other_owner)]  # the owner is who saved it: two agents, one piece of advice


@pytest.mark.django_db
def test_a_rejected_pair_is_not_proposed_again():
    ids = seed(rows=TABS)
    slim_reject(acting("user:alice"), first_id=ids[1], second_id=ids[0])
    assert find_groups() == []


@pytest.mark.django_db(transaction=True)
def test_slim_merges_groups_through_the_worker_and_unmerge_restores_exactly(fake_openai, llm_worker):
    acme = client_for("research_agent", ["org:acme"])
    ids = seed(tags={"domain": "scraping"})
    Knowledge.objects.filter(pk=ids[0]).update(helpful=2, harmful=1, score=5)
    Knowledge.objects.filter(pk=ids[1]).update(helpful=3, score=3)
    before = {k.id: (k.task, k.content, k.status, k.helpful) for k in Knowledge.objects.all()}
    fake_openai.default = ("json", {"task": "Merged task", "content": "Merged content"})
    fake_openai.by_schema["knowledge_relation"] = {"relation": "duplicate", "explanation": "same advice"}

    response = acme.post("/api/knowledge/slim", {"model": "google/gemini-2.0-flash-001"}, format="json")
    assert response.status_code == 202
    url = response.json()["job"]["url"]
    job = wait_for(lambda: (b := acme.get(url).json())["status"] in ("succeeded", "failed") and b, timeout=120, message="slim")
    assert job["status"] == "succeeded", job
    pairs = job["progress"]["pairs_checked"]
    assert pairs >= 3 and job["progress"] == {"pairs_checked": pairs, "held_back": 0, "groups_found": 2, "merged": 2,
                                              "proposed": 0, "failed": 0}
    checks = [r for r in fake_openai.requests if r["body"]["response_format"]["json_schema"]["name"] == "knowledge_relation"]
    assert len(checks) == pairs  # one LLM check per joined pair, before any merge
    assert fake_openai.requests[-1]["body"]["model"] == "google/gemini-2.0-flash-001"

    merged_ids = [g["merged_id"] for g in job["result"]["groups"]]
    first = Knowledge.objects.get(pk=next(m for m, g in zip(merged_ids, job["result"]["groups"]) if ids[0] in g["ids"]))
    assert (first.helpful, first.harmful, first.score) == (5, 1, 4)  # summed; mean of 5, 3, 3
    assert first.scopes == ["org:acme"] and first.tags == {"domain": "scraping"}
    originals = Knowledge.objects.filter(pk__in=ids[:3])
    assert {o.status for o in originals} == {"merged"} and {o.merged_into_id for o in originals} == {first.id}
    assert acme.get(f"/api/knowledge/{ids[0]}").status_code == 200  # still readable by id
    assert acme.get("/api/knowledge/search", {"q": "Merged task", "min_score": 1}).json()["results"][0]["id"] in merged_ids

    for merged_id in merged_ids:
        knowledge_unmerge(acting(), merged_id=merged_id)
    after = {k.id: (k.task, k.content, k.status, k.helpful) for k in Knowledge.objects.filter(pk__in=before)}
    assert after == before
    assert set(Knowledge.objects.filter(pk__in=merged_ids).values_list("status", flat=True)) == {"archived"}


@pytest.mark.django_db(transaction=True)
def test_dry_run_proposes_without_writing(fake_openai, llm_worker):
    acme = client_for("research_agent", ["org:acme"])
    ids = seed(rows=TABS)
    fake_openai.default = ("json", {"task": "Tabs", "content": "Tabs and type hints"})
    fake_openai.by_schema["knowledge_relation"] = {"relation": "duplicate", "explanation": "same preference"}
    url = acme.post("/api/knowledge/slim", {"dry_run": True}, format="json").json()["job"]["url"]
    job = wait_for(lambda: (b := acme.get(url).json())["status"] in ("succeeded", "failed") and b, timeout=120, message="slim")
    [group] = job["result"]["groups"]
    assert group["ids"] == sorted(ids) and group["proposal"] == {"task": "Tabs", "content": "Tabs and type hints"}
    stored = MergeProposal.objects.get(pk=group["proposal_id"])
    assert (stored.ids, stored.status, stored.task, str(stored.job_id)) == (sorted(ids), "pending", "Tabs", job["id"])
    assert set(Knowledge.objects.values_list("status", flat=True)) == {"active"} and Knowledge.objects.count() == 2


@pytest.mark.django_db
def test_slim_without_an_llm_is_409(settings):
    settings.KNOWHUB_LLM_MODEL = ""
    response = client_for("research_agent", ["org:acme"]).post("/api/knowledge/slim", {}, format="json")
    assert response.status_code == 409 and "OPENAI_API_KEY" in response.json()["error"]["message"]


@pytest.mark.django_db
def test_a_curator_approves_an_edited_proposal():
    from knowledge.slim import slim_approve

    ids = seed(rows=TABS)
    merged = slim_approve(acting("user:alice"), ids=ids, task="Tabs, edited", content="Edited by a curator")
    assert (merged.task, merged.source["submitted_by"]) == ("Tabs, edited", "user:alice")
    assert set(Knowledge.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"merged"}
    with pytest.raises(ValueError, match="no longer active"):
        slim_approve(acting("user:alice"), ids=ids, task="again", content="again")


@pytest.mark.django_db
def test_a_pair_the_llm_calls_a_contradiction_is_held_back_and_never_merged(fake_openai):
    from jobs.services import job_create
    from knowledge.slim import slim_run

    ids = seed(rows=[("Liveness probe", "The liveness probe must not check the database."),
                     ("Liveness probe", "The liveness probe must check the database.")])
    assert find_groups() == [sorted(ids)]  # the words alone would merge them
    fake_openai.by_schema["knowledge_relation"] = {"relation": "contradiction", "explanation": "opposite advice"}
    job = job_create(kind="slim", requested_by="agent:a", params={"model": None, "dry_run": False, "writable_scopes": None})
    done = slim_run(job_id=str(job.id), worker="test")
    assert done.result == {"groups": [], "held_back": [{"ids": sorted(ids), "relation": "contradiction",
                                                        "explanation": "opposite advice"}]}
    assert done.progress["held_back"] == 1 and done.progress["merged"] == 0
    assert set(Knowledge.objects.values_list("status", flat=True)) == {"active"}


@pytest.mark.django_db
def test_a_pair_the_llm_could_not_judge_is_held_back_too(fake_openai):
    from jobs.services import job_create
    from knowledge.slim import slim_run

    ids = seed(rows=TABS)
    fake_openai.fail(500)
    job = job_create(kind="slim", requested_by="agent:a", params={"model": None, "dry_run": True, "writable_scopes": None})
    done = slim_run(job_id=str(job.id), worker="test")
    [held] = done.result["held_back"]
    assert held["ids"] == sorted(ids) and held["relation"] is None and held["error"]
    assert not MergeProposal.objects.exists()


@pytest.mark.django_db
def test_slim_says_how_many_pairs_it_checked_while_the_llm_checks_them(fake_openai, monkeypatch):
    from jobs.models import Job
    from jobs.services import job_create
    from knowledge import relation, slim

    seed()
    seen, judge = [], relation.judge

    def judged_while_watched(first, second, **kwargs):
        seen.append(dict(Job.objects.get(pk=job.pk).progress))
        return judge(first, second, **kwargs)

    monkeypatch.setattr(slim, "PROGRESS_EVERY_SECONDS", 0)
    monkeypatch.setattr(relation, "judge", judged_while_watched)
    fake_openai.by_schema["knowledge_relation"] = {"relation": "duplicate", "explanation": "same advice"}
    job = job_create(kind="slim", requested_by="agent:a", params={"model": None, "dry_run": True, "writable_scopes": None})
    done = slim.slim_run(job_id=str(job.id), worker="test")
    pairs = done.progress["pairs_checked"]
    assert pairs >= 3 and seen == [{"pairs_to_check": pairs, "pairs_checked": n, "held_back": 0} for n in range(pairs)]


@pytest.fixture
def slim_clock(monkeypatch):
    """slim's own clock (its deadline's), moved on by hand: `slim_clock.pass_(seconds)` where a step would take them."""
    from types import SimpleNamespace

    from knowledge import slim

    clock = SimpleNamespace(now=1_000.0)
    clock.pass_ = lambda seconds: setattr(clock, "now", clock.now + seconds)
    monkeypatch.setattr(slim, "time", SimpleNamespace(monotonic=lambda: clock.now))
    return clock


def _slim_job(dry_run=False):
    from jobs.services import job_create

    return str(job_create(kind="slim", requested_by="agent:a",
                          params={"model": None, "dry_run": dry_run, "writable_scopes": None}).id)


@pytest.mark.django_db
def test_a_slim_run_past_its_time_limit_while_checking_pairs_fails_saying_how_far_it_got_and_changes_nothing(
        fake_openai, settings, slim_clock, monkeypatch):
    from knowledge import relation, slim

    ids = seed()
    settings.KNOWHUB_SLIM_TIME_LIMIT_SECONDS = 100
    judge = relation.judge

    def slow_judge(*args, **kwargs):  # each pair's check takes 60 s: the second one ends past the limit
        slim_clock.pass_(60)
        return judge(*args, **kwargs)

    monkeypatch.setattr(relation, "judge", slow_judge)
    fake_openai.by_schema["knowledge_relation"] = {"relation": "duplicate", "explanation": "same advice"}
    done = slim.slim_run(job_id=_slim_job(), worker="test")
    assert done.status == "failed" and done.progress["pairs_checked"] == 2, (done.status, done.progress)
    pairs = done.progress["pairs_to_check"]
    assert pairs > 2 and done.error == (
        f"stopped at the time limit (KNOWHUB_SLIM_TIME_LIMIT_SECONDS, 100 s) after checking 2 of {pairs} pairs, "
        "before merging: nothing was changed; run slim again (or with a higher limit) to go on")
    assert len(fake_openai.requests) == 2  # no further LLM call once past the limit
    assert set(Knowledge.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"active"}


@pytest.mark.django_db
def test_a_slim_run_past_its_time_limit_while_looking_for_pairs_stops_there_and_asks_no_llm(
        fake_openai, settings, slim_clock, monkeypatch):
    from knowledge import neighbours, slim

    ids = seed()
    settings.KNOWHUB_SLIM_TIME_LIMIT_SECONDS = 100
    among, nearest = slim.close_pairs_among, neighbours.vectors.nearest_of_each
    monkeypatch.setattr(slim, "close_pairs_among", lambda items, **kwargs: among(items, page=2, **kwargs))  # 4 pages

    def slow_page(*args, **kwargs):
        slim_clock.pass_(60)
        return nearest(*args, **kwargs)

    monkeypatch.setattr(neighbours.vectors, "nearest_of_each", slow_page)
    done = slim.slim_run(job_id=_slim_job(), worker="test")
    assert (done.status, done.error) == ("failed", "stopped at the time limit (KNOWHUB_SLIM_TIME_LIMIT_SECONDS, 100 s) "
                                         "while looking for near-duplicate pairs: nothing was changed; run slim with "
                                         "a higher limit")
    assert fake_openai.requests == [] and set(Knowledge.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"active"}


@pytest.mark.django_db
def test_a_slim_run_past_its_time_limit_while_merging_keeps_the_groups_it_merged_and_a_second_run_merges_the_rest(
        fake_openai, settings, slim_clock, monkeypatch):
    from knowledge import slim

    ids = seed()
    settings.KNOWHUB_SLIM_TIME_LIMIT_SECONDS = 100
    fake_openai.default = ("json", {"task": "Merged task", "content": "Merged content"})
    fake_openai.by_schema["knowledge_relation"] = {"relation": "duplicate", "explanation": "same advice"}
    propose = slim.propose_merge

    def slow_proposal(items, **kwargs):
        slim_clock.pass_(110)
        return propose(items, **kwargs)

    monkeypatch.setattr(slim, "propose_merge", slow_proposal)
    first = slim.slim_run(job_id=_slim_job(), worker="test")
    assert first.status == "failed" and first.progress["merged"] == 1, (first.status, first.progress)
    assert first.error.endswith("settling 1 of 2 groups (1 merged, 0 proposed): those stay; run slim again to go on")
    statuses = list(Knowledge.objects.filter(pk__in=ids).values_list("status", flat=True))
    assert statuses.count("merged") in (2, 3)  # one group (TABS or DUPLICATES) merged, and it stays

    settings.KNOWHUB_SLIM_TIME_LIMIT_SECONDS = 0  # no limit: the second run goes on from there
    second = slim.slim_run(job_id=_slim_job(), worker="test")
    assert second.status == "succeeded" and second.progress["merged"] == 1
    assert Knowledge.objects.filter(pk__in=ids, status="merged").count() == 5  # the three copies and the two tabs items
    assert Knowledge.objects.filter(pk__in=ids, status="active").count() == 2  # the two others


@pytest.mark.django_db
def test_a_slim_run_whose_job_was_claimed_again_stops_checking_pairs(fake_openai, monkeypatch):
    from jobs.models import Job
    from jobs.services import job_claim, job_create
    from knowledge import relation, slim

    seed()
    calls, judge = [], relation.judge

    def judged_then_resent(first, second, **kwargs):
        calls.append(1)
        job_claim(job_id=job.id, worker="live/2/b", task_id="resent")  # its worker looks dead: the copy claims it
        return judge(first, second, **kwargs)

    monkeypatch.setattr(slim, "PROGRESS_EVERY_SECONDS", 0)
    monkeypatch.setattr(relation, "judge", judged_then_resent)
    fake_openai.by_schema["knowledge_relation"] = {"relation": "duplicate", "explanation": "same advice"}
    job = job_create(kind="slim", requested_by="agent:a", params={"model": None, "dry_run": True, "writable_scopes": None})
    stale = slim.slim_run(job_id=str(job.id), worker="dead/1/a", task_id="first")
    assert len(calls) == 1 and (stale.status, stale.task_id, stale.attempts) == ("running", "resent", 2)
    assert not MergeProposal.objects.exists() and Job.objects.get(pk=job.pk).progress["pairs_checked"] == 0


@pytest.mark.django_db(transaction=True)
def test_merges_and_feedback_batches_on_the_same_items_at_once_never_deadlock():
    """Every writer of several items locks them in id order. Merges locked them oldest first and a batch's reports
    share-locked them in the order given, so a merge of an older item with a larger id and a batch naming them the
    other way round deadlocked (6 of 12 rounds through the API answered 503)."""
    import threading

    from django.db import connections

    from knowledge.feedback import feedback_record_batch
    from knowledge.slim import slim_approve

    errors = []
    for round_ in range(12):
        older, newer = make_knowledge(task=f"Round {round_} a"), make_knowledge(task=f"Round {round_} b")
        ids = [older.id, newer.id]
        both_ways = [ids, ids[::-1]]
        start = threading.Barrier(3)

        def run(work):
            try:
                start.wait()
                work()
            except Exception as exc:  # noqa: BLE001 - collected: the assertion below names it
                errors.append(exc)
            finally:
                connections.close_all()

        def report(order):
            from django.db import transaction

            with transaction.atomic():
                feedback_record_batch(acting("agent:a"), [{"knowledge_id": i, "helpful": True, "case": {"outcome": "ok"}}
                                                         for i in order for _ in range(3)])

        threads = [threading.Thread(target=run, args=(lambda: slim_approve(acting("user:alice"), ids=ids, task="m",
                                                                           content="m"),))]
        threads += [threading.Thread(target=run, args=(lambda order=order: report(order),)) for order in both_ways]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert errors == []


@pytest.mark.django_db
def test_a_report_on_an_item_merged_away_counts_for_the_item_it_became_and_unmerging_gives_it_back():
    from knowledge.models import FeedbackCase
    from knowledge.slim import knowledge_unmerge, slim_approve

    ids = seed(rows=TABS)
    agent = client_for("research_agent", ["org:acme"])
    search_id = agent.get("/api/knowledge/search", {"q": "tabs for indentation", "min_score": 1}).json()["search_id"]
    merged = slim_approve(acting("user:alice"), ids=ids, task="Tabs", content="Tabs and type hints")
    single = agent.put(f"/api/knowledge/{ids[0]}", {"add_helpful_case": {"outcome": "tabs it was"},
                                                    "search_id": search_id}, format="json")
    assert single.status_code == 200 and single.json()["eval"]["helpful"] == 1  # the original's own count
    batch = agent.post("/api/knowledge/batch_update", {"feedback_list": [
        {"knowledge_id": ids[1], "is_helpful": False, "case": {"outcome": "wrong"}},
        {"knowledge_id": ids[0], "is_helpful": True}]}, format="json")
    assert batch.status_code == 200 and batch.json()["succeeded"] == 2

    item = Knowledge.objects.get(pk=merged.id)  # what search ranks now: every report counted, each case kept
    assert (item.helpful, item.harmful) == (2, 1)
    assert FeedbackCase.objects.filter(knowledge_id=merged.id).count() == 3
    assert FeedbackCase.objects.get(knowledge_id=ids[0], kind="helpful", case__outcome="tabs it was").search_id
    # the search returned the original, not the merged item: its judgment is not copied (it would lower the nDCG)
    assert not FeedbackCase.objects.filter(knowledge_id=merged.id, search_id__isnull=False).exists()
    assert [c["outcome"] for c in FeedbackCase.objects.filter(knowledge_id=merged.id, kind="harmful")
            .values_list("case", flat=True)] == ["wrong"]

    knowledge_unmerge(acting("user:alice"), merged_id=merged.id)
    first, second = Knowledge.objects.get(pk=ids[0]), Knowledge.objects.get(pk=ids[1])
    assert (first.status, first.helpful, second.harmful) == ("active", 2, 1)  # the originals keep their own reports


@pytest.mark.django_db
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_merged_text_over_the_limits_is_not_applied_and_the_job_reports_the_group(fake_openai, dry_run):
    from jobs.services import job_create
    from knowledge.limits import CONTENT_MAX
    from knowledge.slim import slim_run

    ids = seed(rows=TABS)
    before = {k.id: (k.task, k.content, k.status) for k in Knowledge.objects.all()}
    fake_openai.by_schema["knowledge_relation"] = {"relation": "duplicate", "explanation": "same preference"}
    fake_openai.by_schema["merged_knowledge"] = {"task": "Tabs", "content": "x" * (30 * CONTENT_MAX)}
    job = job_create(kind="slim", requested_by="agent:a", params={"model": None, "dry_run": dry_run, "writable_scopes": None})
    done = slim_run(job_id=str(job.id), worker="test")

    assert done.status == "succeeded" and (done.progress["merged"], done.progress["proposed"], done.progress["failed"]) == (0, 0, 1)
    [group] = done.result["groups"]
    assert group["ids"] == sorted(ids) and "merged_knowledge" in group["error"] and "merged_id" not in group
    assert {k.id: (k.task, k.content, k.status) for k in Knowledge.objects.all()} == before  # nothing stored
    assert not MergeProposal.objects.exists()
    [asked] = [r["body"]["response_format"]["json_schema"] for r in fake_openai.requests
               if r["body"]["response_format"]["json_schema"]["name"] == "merged_knowledge"]
    assert asked["schema"]["properties"]["content"]["maxLength"] == CONTENT_MAX  # the LLM is told the limits too


@pytest.mark.django_db
def test_a_stored_proposal_over_the_limits_is_not_merged_when_approved():
    from knowledge.limits import TASK_MAX
    from knowledge.slim import slim_approve

    ids = seed(rows=TABS)
    with pytest.raises(ValueError, match="task"):
        slim_approve(acting("user:alice"), ids=ids, task="t" * (TASK_MAX + 1), content="Tabs and type hints")
    assert set(Knowledge.objects.values_list("status", flat=True)) == {"active"} and Knowledge.objects.count() == 2


@pytest.mark.django_db
def test_a_pair_whose_reply_nests_hundreds_of_levels_is_held_back_and_the_job_goes_on(fake_openai):
    from jobs.services import job_create
    from knowledge.slim import slim_run

    extra = "x"
    for _ in range(500):
        extra = {"a": extra}
    ids = seed(rows=TABS)
    fake_openai.by_schema["knowledge_relation"] = {"relation": "duplicate", "explanation": "same", "extra": extra}
    job = job_create(kind="slim", requested_by="agent:a", params={"model": None, "dry_run": True, "writable_scopes": None})
    done = slim_run(job_id=str(job.id), worker="test")
    assert done.status == "succeeded"
    [held] = done.result["held_back"]
    assert held["ids"] == sorted(ids) and held["relation"] is None and "nests deeper than" in held["error"]
    assert not MergeProposal.objects.exists()


@pytest.mark.django_db
def test_hundreds_of_copies_of_one_lesson_become_groups_a_curator_can_approve_and_each_proposal_is_stored():
    from knowledge.slim import GROUP_MAX, group_pairs, store_proposal

    ids = [f"knowledge-20261207-{n:04x}" for n in range(400)]
    every_pair = [(a, b) for i, a in enumerate(ids) for b in ids[i + 1 : i + 6]]  # each alike its next five

    groups = group_pairs(every_pair)

    assert all(2 <= len(group) <= GROUP_MAX for group in groups) and len(groups) >= 400 // GROUP_MAX
    assert sum(map(len, groups)) >= 390  # nearly every copy in some group: the rest come with the next slim
    for group in groups:
        store_proposal(group, {"task": "Restart the payment worker", "content": "systemctl restart payments-worker"})
    assert MergeProposal.objects.count() == len(groups)
