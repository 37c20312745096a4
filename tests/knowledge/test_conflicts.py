"""Contradiction and overlap detection on saved items, and every review action with its reversal (issue 17).

The candidate pairs come from the real search indexes (real embedder, real database); the LLM's judgment from
the loopback OpenAI-compatible server.
"""
import pytest

from agents.models import AuditEvent
from knowledge.conflicts import detect_for
from knowledge.models import Conflict, Knowledge, MergeProposal, SlimRejection
from knowledge.search.indexing import embed_items
from tests.callers import agent_client, person_in, session_client
from tests.conftest import CeleryWorker, wait_for
from tests.factories import make_knowledge

PROBE_SAYS_NO = ("Liveness probe for the web service", "The liveness probe must not check the database: a database "
                 "outage would restart every pod. Check only that the process answers.")
PROBE_SAYS_YES = ("Liveness probe for the web service", "Make the liveness probe check the database, so a pod that lost "
                  "its database connection is restarted.")
PROBE_IN_OTHER_WORDS = ("Web service liveness probe", "Do not let the liveness probe query the database; a database "
                        "outage would otherwise restart all pods. Only check that the process responds.")
UNRELATED = ("Reconcile invoices", "Export the ledger as CSV and match the invoice numbers by hand.")


def saved(*rows, scopes=("org:acme",), owner="agent:research_agent"):
    items = [make_knowledge(task=t, content=c, scopes=list(scopes), owner=owner, embed=False) for t, c in rows]
    embed_items(items=items)
    return [Knowledge.objects.get(pk=i.pk) for i in items]


@pytest.fixture
def detection(settings):
    settings.KNOWHUB_CONFLICT_DETECTION = True


@pytest.fixture
def curator(django_user_model):
    return session_client(person_in(django_user_model, "curator", "carl"))


@pytest.mark.django_db
def test_without_an_llm_close_pairs_are_listed_for_a_person_and_unrelated_items_are_not(detection, settings):
    settings.KNOWHUB_LLM_MODEL = ""
    no, yes, other = saved(PROBE_SAYS_NO, PROBE_SAYS_YES, UNRELATED)
    raised = detect_for(knowledge_ids=[yes.id])
    assert [(c.kind, {c.first_id, c.second_id}) for c in raised] == [("close", {no.id, yes.id})]
    assert not Conflict.objects.filter(first=other).exists() and not Conflict.objects.filter(second=other).exists()
    assert raised[0].detected_for == yes.id and raised[0].model == "" and raised[0].similarity > 0.5


@pytest.mark.django_db
def test_a_contradiction_is_judged_by_the_llm_and_recorded_with_its_reason(detection, fake_openai):
    no, yes = saved(PROBE_SAYS_NO, PROBE_SAYS_YES)
    fake_openai.reply_json({"relation": "contradiction", "explanation": "One forbids checking the database, the other requires it."})
    [conflict] = detect_for(knowledge_ids=[yes.id])
    assert (conflict.kind, conflict.status, conflict.model) == ("contradiction", "open", "fake-model")
    assert "forbids" in conflict.explanation
    sent = fake_openai.requests[-1]["body"]
    prompt = " ".join(m["content"] for m in sent["messages"])
    assert PROBE_SAYS_NO[1] in prompt and PROBE_SAYS_YES[1] in prompt
    assert sent["response_format"]["json_schema"]["name"] == "knowledge_relation"
    assert not MergeProposal.objects.exists()


@pytest.mark.django_db
def test_a_duplicate_pair_feeds_the_merge_review_with_a_stored_proposal(detection, fake_openai):
    no, same = saved(PROBE_SAYS_NO, PROBE_IN_OTHER_WORDS)
    fake_openai.reply_json({"relation": "duplicate", "explanation": "Same advice."})
    fake_openai.reply_json({"task": "Liveness probe", "content": "Never check the database in a liveness probe."})
    [conflict] = detect_for(knowledge_ids=[same.id])
    proposal = MergeProposal.objects.get()
    assert conflict.kind == "duplicate" and proposal.conflict_id == conflict.id
    assert (proposal.ids, proposal.status, proposal.task) == (sorted([no.id, same.id]), "pending", "Liveness probe")


@pytest.mark.django_db
def test_an_unrelated_verdict_records_nothing(detection, fake_openai):
    no, yes = saved(PROBE_SAYS_NO, PROBE_SAYS_YES)
    fake_openai.reply_json({"relation": "unrelated", "explanation": "Different services."})
    assert detect_for(knowledge_ids=[yes.id]) == [] and not Conflict.objects.exists()


@pytest.mark.django_db
def test_detection_stays_within_the_scopes_an_item_shares(detection, settings):
    settings.KNOWHUB_LLM_MODEL = ""
    [no] = saved(PROBE_SAYS_NO, scopes=("org:acme",))
    [yes] = saved(PROBE_SAYS_YES, scopes=("org:other",))
    assert detect_for(knowledge_ids=[yes.id]) == []


@pytest.mark.django_db
def test_a_dismissed_pair_is_never_raised_again(detection, fake_openai, curator):
    no, yes = saved(PROBE_SAYS_NO, PROBE_SAYS_YES)
    fake_openai.reply_json({"relation": "contradiction", "explanation": "opposite"})
    [conflict] = detect_for(knowledge_ids=[yes.id])
    response = curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "dismiss"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "dismissed"
    calls = len(fake_openai.requests)
    assert detect_for(knowledge_ids=[yes.id]) == [] and detect_for(knowledge_ids=[no.id]) == []
    assert len(fake_openai.requests) == calls  # not even judged again
    assert Conflict.objects.get().status == "dismissed"


def _open_conflict(fake_openai, relation="contradiction"):
    no, yes = saved(PROBE_SAYS_NO, PROBE_SAYS_YES)
    fake_openai.reply_json({"relation": relation, "explanation": "opposite advice"})
    [conflict] = detect_for(knowledge_ids=[yes.id])
    return no, yes, conflict


def _search_ids(client, q, **params):
    return [hit["id"] for hit in client.get("/api/knowledge/search", {"q": q, "min_score": 1, **params}).json()["results"]]


@pytest.mark.django_db
def test_supersede_takes_the_older_item_out_of_search_and_reopening_brings_it_back(detection, fake_openai, curator):
    no, yes, conflict = _open_conflict(fake_openai)
    agent = agent_client("research_agent", ["org:acme"])
    assert no.id in _search_ids(agent, "liveness probe database")

    settled = curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "supersede", "successor_id": no.id},
                           format="json").json()
    assert settled["status"] == "superseded" and settled["resolution"] == {"superseded": yes.id, "successor": no.id}
    old = agent.get(f"/api/knowledge/{yes.id}").json()
    assert (old["status"], old["superseded_by"]) == ("superseded", no.id)
    assert agent.get(f"/api/knowledge/{no.id}").json()["supersedes"] == [yes.id]
    assert yes.id not in _search_ids(agent, "liveness probe check the database")
    asked = agent.get("/api/knowledge/search", {"q": "liveness probe check the database", "min_score": 1,
                                                 "include_superseded": "true"}).json()["results"]
    assert {"id": yes.id, "superseded_by": no.id}.items() <= next(h for h in asked if h["id"] == yes.id).items()

    reopened = curator.post(f"/api/conflicts/{conflict.id}/reopen").json()
    assert reopened["status"] == "open" and reopened["resolution"] == {}
    assert Knowledge.objects.get(pk=yes.id).status == "active" and Knowledge.objects.get(pk=yes.id).superseded_by is None
    assert yes.id in _search_ids(agent, "liveness probe check the database")
    assert list(AuditEvent.objects.filter(operation__startswith="conflict_").values_list("operation", flat=True)
                .order_by("id")) == ["conflict_resolve", "conflict_reopen"]


@pytest.mark.django_db
def test_making_a_superseded_item_active_reopens_the_conflict_that_superseded_it(detection, fake_openai, curator):
    no, yes, conflict = _open_conflict(fake_openai)
    curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "supersede", "successor_id": no.id}, format="json")

    assert curator.post(f"/api/knowledge/{yes.id}/activate").status_code == 200

    reopened = Conflict.objects.get(pk=conflict.id)
    assert (reopened.status, reopened.resolution, reopened.resolved_by, reopened.resolved_at) == ("open", {}, "", None)
    assert Knowledge.objects.get(pk=yes.id).status == "active"
    settled = curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "keep_both"}, format="json")
    assert settled.status_code == 200 and settled.json()["status"] == "kept_both"  # open, so a person settles it again


@pytest.mark.django_db
def test_activating_leaves_a_conflict_whose_supersede_another_successor_replaced_as_it_is(detection, fake_openai, curator):
    no, yes, conflict = _open_conflict(fake_openai)
    [other] = saved(PROBE_IN_OTHER_WORDS)
    curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "supersede", "successor_id": no.id}, format="json")
    Knowledge.objects.filter(pk=yes.id).update(superseded_by=other)  # another decision since (stored before activation reopened)

    assert curator.post(f"/api/knowledge/{yes.id}/activate").status_code == 200

    assert Conflict.objects.get(pk=conflict.id).status == "superseded"  # not the decision this activation undid


@pytest.mark.django_db
def test_reopening_a_supersede_leaves_an_item_superseded_since_by_another_as_it_is(detection, fake_openai, curator):
    no, yes, conflict = _open_conflict(fake_openai)
    [other] = saved(PROBE_IN_OTHER_WORDS)
    curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "supersede", "successor_id": no.id}, format="json")
    # superseded since by another item while this conflict stayed settled (as activating did before it reopened it)
    Knowledge.objects.filter(pk=yes.id).update(superseded_by=other)

    reopened = curator.post(f"/api/conflicts/{conflict.id}/reopen").json()

    assert reopened["status"] == "open"
    kept = Knowledge.objects.get(pk=yes.id)
    assert (kept.status, kept.superseded_by_id) == ("superseded", other.id)


@pytest.mark.django_db
def test_supersede_by_default_keeps_the_newer_item(detection, fake_openai, curator):
    no, yes, conflict = _open_conflict(fake_openai)
    curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "supersede"}, format="json")
    newer, older = sorted([no, yes], key=lambda k: (k.created_at, k.id), reverse=True)
    assert Knowledge.objects.get(pk=older.id).superseded_by_id == newer.id


@pytest.mark.django_db
def test_merge_goes_through_the_merge_path_and_reopening_unmerges(detection, fake_openai, curator):
    no, yes, conflict = _open_conflict(fake_openai, relation="refinement")
    merged = curator.post(f"/api/conflicts/{conflict.id}/resolve",
                          {"action": "merge", "task": "Liveness probe", "content": "Check only the process."}, format="json").json()
    merged_id = merged["resolution"]["merged_id"]
    assert merged["status"] == "merged"
    assert set(Knowledge.objects.filter(merged_into_id=merged_id).values_list("id", flat=True)) == {no.id, yes.id}
    proposal = MergeProposal.objects.get(merged_id=merged_id)
    assert (proposal.status, proposal.decided_by) == ("edited", "user:carl")

    curator.post(f"/api/conflicts/{conflict.id}/reopen")
    assert set(Knowledge.objects.filter(pk__in=[no.id, yes.id]).values_list("status", flat=True)) == {"active"}
    assert Knowledge.objects.get(pk=merged_id).status == "archived"
    assert Conflict.objects.get(pk=conflict.id).status == "open"


@pytest.mark.django_db
def test_keep_both_is_remembered_against_merging_and_reversible(detection, fake_openai, curator):
    no, yes, conflict = _open_conflict(fake_openai)
    assert curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "keep_both"}, format="json").json()["status"] == "kept_both"
    assert SlimRejection.objects.filter(first_id=min(no.id, yes.id), second_id=max(no.id, yes.id)).exists()
    assert curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "dismiss"}, format="json").status_code == 409
    curator.post(f"/api/conflicts/{conflict.id}/reopen")
    assert not SlimRejection.objects.exists() and Conflict.objects.get().status == "open"


@pytest.mark.django_db
def test_bad_actions_get_a_4xx_naming_the_field(detection, fake_openai, curator):
    no, yes, conflict = _open_conflict(fake_openai)
    bad = curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "delete"}, format="json")
    assert bad.status_code == 400 and "action" in bad.json()["error"]["fields"]
    stranger = curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "supersede", "successor_id": "knowledge-20260101-zzzz"},
                            format="json")
    assert stranger.status_code == 409 and stranger.json()["error"]["fields"].keys() == {"successor_id"}
    no_text = curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "merge"}, format="json")
    assert no_text.status_code == 409 and no_text.json()["error"]["fields"].keys() == {"task"}
    assert curator.get("/api/conflicts/999999").status_code == 404
    assert curator.get("/api/conflicts/abc").status_code == 404
    assert Knowledge.objects.filter(status="active").count() == 2


@pytest.mark.django_db
def test_only_curators_see_and_settle_conflicts_and_only_within_their_scopes(detection, fake_openai, django_user_model):
    no, yes, conflict = _open_conflict(fake_openai)
    viewer = session_client(person_in(django_user_model, "viewer", "vera"))
    nobody = session_client(person_in(django_user_model, None, "nina"))
    agent = agent_client("research_agent", ["org:acme"])
    other_curator = agent_client("other_curator", ["org:other"], can_curate=True)
    acme_curator = agent_client("acme_curator", ["org:acme"], can_curate=True)
    for client in (viewer, nobody, agent):
        assert client.get("/api/conflicts").status_code == 403
        assert client.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "dismiss"}, format="json").status_code == 403
    assert other_curator.get("/api/conflicts").json()["count"] == 0
    assert other_curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "dismiss"}, format="json").status_code == 404
    listed = acme_curator.get("/api/conflicts").json()
    assert listed["count"] == 1 and listed["results"][0]["first"]["id"] == min(no.id, yes.id)
    assert acme_curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "dismiss"}, format="json").status_code == 200
    assert acme_curator.get("/api/conflicts").json()["count"] == 0
    assert acme_curator.get("/api/conflicts", {"status": "all"}).json()["count"] == 1


@pytest.mark.django_db
def test_supersede_directly_follows_the_edit_rule_and_activate_reverses_it(django_user_model):
    no, yes = saved(PROBE_SAYS_NO, PROBE_SAYS_YES)
    owner = agent_client("research_agent", ["org:acme"])
    peer = agent_client("peer_agent", ["org:acme"])
    assert peer.post(f"/api/knowledge/{yes.id}/supersede", {"successor_id": no.id}, format="json").status_code == 403
    done = owner.post(f"/api/knowledge/{yes.id}/supersede", {"successor_id": no.id}, format="json")
    assert done.status_code == 200 and done.json()["status"] == "superseded"
    again = owner.post(f"/api/knowledge/{no.id}/supersede", {"successor_id": yes.id}, format="json")
    assert again.status_code == 409 and again.json()["error"]["fields"].keys() == {"successor_id"}  # a superseded item succeeds nothing
    missing = owner.post(f"/api/knowledge/{yes.id}/supersede", {}, format="json")
    assert missing.status_code == 400 and "successor_id" in missing.json()["error"]["fields"]
    back = owner.post(f"/api/knowledge/{yes.id}/activate", {}, format="json").json()
    assert (back["status"], back["superseded_by"]) == ("active", None)


@pytest.fixture
def detecting_worker(fake_openai, django_db_setup, django_db_blocker):
    """A real worker with conflict detection on, its LLM the loopback fake."""
    with django_db_blocker.unblock():
        worker = CeleryWorker(name="detect-worker", extra_env={
            "OPENAI_BASE_URL": fake_openai.base_url, "OPENAI_API_KEY": "test-key", "KNOWHUB_LLM_MODEL": "fake-model",
            "KNOWHUB_CONFLICT_DETECTION": "1"}).start()
    yield worker
    worker.stop()


@pytest.mark.django_db(transaction=True)
def test_a_save_through_the_api_raises_a_conflict_through_the_real_worker(fake_openai, detecting_worker):
    agent = agent_client("research_agent", ["org:acme"])
    first = agent.post("/api/knowledge", {"task": PROBE_SAYS_NO[0], "content": PROBE_SAYS_NO[1], "types": ["strategy"]},
                       format="json").json()
    wait_for(lambda: Knowledge.objects.get(pk=first["id"]).embedding is not None, timeout=180, message="first vector")
    fake_openai.reply_json({"relation": "contradiction", "explanation": "opposite advice on the probe"})
    second = agent.post("/api/knowledge", {"task": PROBE_SAYS_YES[0], "content": PROBE_SAYS_YES[1], "types": ["strategy"]},
                        format="json").json()
    conflict = wait_for(lambda: Conflict.objects.first(), timeout=120, message="the conflict")
    assert {conflict.first_id, conflict.second_id} == {first["id"], second["id"]}
    assert (conflict.kind, conflict.explanation) == ("contradiction", "opposite advice on the probe")
    # whichever item's detection found the pair first, the other's does not judge it again
    wait_for(lambda: Knowledge.objects.get(pk=second["id"]).embedding is not None, timeout=120, message="second vector")
    import time
    time.sleep(3)
    assert len([r for r in fake_openai.requests if "knowledge_relation" in str(r["body"].get("response_format"))]) == 1
    assert Conflict.objects.get().kind == "contradiction"


@pytest.mark.django_db
def test_a_search_hit_warns_of_its_open_conflicts_with_items_the_caller_can_read(detection, settings):
    settings.KNOWHUB_LLM_MODEL = ""
    [no] = saved(PROBE_SAYS_NO, scopes=("org:acme", "org:other"))
    [yes] = saved(PROBE_SAYS_YES, scopes=("org:acme",))
    [conflict] = detect_for(knowledge_ids=[yes.id])
    acme = agent_client("research_agent", ["org:acme"])
    hits = {h["id"]: h for h in acme.get("/api/knowledge/search", {"q": "liveness probe database", "min_score": 1}).json()["results"]}
    assert hits[no.id]["conflicts"] == [{"conflict_id": conflict.id, "kind": "close", "with": yes.id}]
    assert hits[yes.id]["conflicts"] == [{"conflict_id": conflict.id, "kind": "close", "with": no.id}]
    outsider = agent_client("other_agent", ["org:other"])  # reads `no` but not the item it conflicts with
    [hit] = outsider.get("/api/knowledge/search", {"q": "liveness probe database", "min_score": 1}).json()["results"]
    assert hit["id"] == no.id and "conflicts" not in hit
    Conflict.objects.update(status="dismissed")
    assert all("conflicts" not in h for h in acme.get("/api/knowledge/search", {"q": "liveness probe database",
                                                                                 "min_score": 1}).json()["results"])


@pytest.mark.django_db(transaction=True)
def test_the_client_and_mcp_search_superseded_items_only_when_asked(live_server):
    from knowhub_client import KnowHub

    from api.mcp_server import _op, _run_sync
    from tests.callers import agent_key

    no, yes = saved(PROBE_SAYS_NO, PROBE_SAYS_YES)
    from knowledge.supersede import knowledge_supersede
    from tests.callers import acting

    knowledge_supersede(acting("user:carl"), knowledge_id=yes.id, successor_id=no.id)
    key = agent_key("research_agent", ["org:acme"])
    with KnowHub(live_server.url, token=key) as client:
        assert yes.id not in [h["id"] for h in client.knowledge_search("liveness probe check the database", min_score=1)["results"]]
        asked = client.knowledge_search("liveness probe check the database", min_score=1, include_superseded=True)["results"]
        assert {"id": yes.id, "superseded_by": no.id}.items() <= next(h for h in asked if h["id"] == yes.id).items()
    over_mcp = _run_sync(key, _op("knowledge_search", {"q": "liveness probe check the database", "min_score": 1,
                                                       "include_superseded": True}))
    assert yes.id in [h["id"] for h in over_mcp["results"]]  # the operation as the MCP tool runs it


@pytest.mark.django_db
def test_a_dismissed_conflict_reopened_is_judged_again_after_an_edit(detection, fake_openai, curator):
    no, yes, conflict = _open_conflict(fake_openai)
    curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "dismiss"}, format="json")
    reopened = curator.post(f"/api/conflicts/{conflict.id}/reopen").json()
    assert reopened["status"] == "open" and not SlimRejection.objects.exists()
    curator.patch(f"/api/knowledge/{yes.id}", {"content": PROBE_SAYS_YES[1] + " Always."}, format="json")
    embed_items(items=[Knowledge.objects.get(pk=yes.id)])
    fake_openai.reply_json({"relation": "refinement", "explanation": "now it adds a condition"})
    [again] = detect_for(knowledge_ids=[yes.id])
    assert (again.id, again.kind, again.status) == (conflict.id, "refinement", "open")


@pytest.mark.django_db
def test_a_successor_must_reach_every_reader_of_the_item_it_replaces(detection, settings, curator):
    settings.KNOWHUB_LLM_MODEL = ""
    [wide] = saved(PROBE_SAYS_NO, scopes=("org:acme", "org:other"))
    [narrow] = saved(PROBE_SAYS_YES, scopes=("org:acme",))
    [conflict] = detect_for(knowledge_ids=[narrow.id])
    refused = curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "supersede", "successor_id": narrow.id},
                           format="json")
    assert refused.status_code == 409 and "org:other" in refused.json()["error"]["message"]
    assert Knowledge.objects.get(pk=wide.id).status == "active"
    fine = curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "supersede", "successor_id": wide.id},
                        format="json")
    assert fine.status_code == 200 and Knowledge.objects.get(pk=narrow.id).superseded_by_id == wide.id


@pytest.mark.django_db
def test_an_llm_explanation_with_a_nul_byte_is_stored_without_it(detection, fake_openai):
    no, yes = saved(PROBE_SAYS_NO, PROBE_SAYS_YES)
    fake_openai.reply_json({"relation": "contradiction", "explanation": "bad\u0000byte"})
    [conflict] = detect_for(knowledge_ids=[yes.id])
    assert Conflict.objects.get(pk=conflict.pk).explanation == "bad\ufffdbyte"


@pytest.mark.django_db
def test_unmerging_a_conflicts_merge_reopens_the_conflict(detection, fake_openai, curator):
    no, yes, conflict = _open_conflict(fake_openai)
    merged = curator.post(f"/api/conflicts/{conflict.id}/resolve",
                          {"action": "merge", "task": "Probe", "content": "Check the process only."}, format="json").json()
    curator.post(f"/api/knowledge/{merged['resolution']['merged_id']}/unmerge")
    assert Conflict.objects.get(pk=conflict.id).status == "open"


@pytest.mark.django_db
def test_keeping_both_settles_the_pairs_merge_proposal_and_reopening_restores_it(detection, fake_openai, curator):
    no, same = saved(PROBE_SAYS_NO, PROBE_IN_OTHER_WORDS)
    fake_openai.reply_json({"relation": "duplicate", "explanation": "Same advice."})
    fake_openai.reply_json({"task": "Liveness probe", "content": "Never check the database in a liveness probe."})
    [conflict] = detect_for(knowledge_ids=[same.id])
    curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "keep_both"}, format="json")
    assert MergeProposal.objects.get().status == "rejected"
    curator.post(f"/api/conflicts/{conflict.id}/reopen")
    assert MergeProposal.objects.get().status == "pending" and Conflict.objects.get().status == "open"


@pytest.mark.django_db
def test_search_does_not_warn_of_a_conflict_with_an_item_no_longer_active(detection, settings):
    settings.KNOWHUB_LLM_MODEL = ""
    no, yes = saved(PROBE_SAYS_NO, PROBE_SAYS_YES)
    detect_for(knowledge_ids=[yes.id])
    Knowledge.objects.filter(pk=yes.id).update(status="archived")
    agent = agent_client("research_agent", ["org:acme"])
    hits = agent.get("/api/knowledge/search", {"q": "liveness probe database", "min_score": 1}).json()["results"]
    assert [h["id"] for h in hits] == [no.id] and "conflicts" not in hits[0]


@pytest.mark.django_db
def test_items_the_periodic_sweep_embeds_are_checked_for_conflicts_too(detection, monkeypatch):
    from knowledge import tasks
    from knowledge.search.indexing import embed_pending

    queued = []
    monkeypatch.setattr(tasks.detect_conflicts, "delay", lambda ids: queued.append(list(ids)))
    item = make_knowledge(task=PROBE_SAYS_NO[0], content=PROBE_SAYS_NO[1], embed=False)  # its message "lost"
    assert embed_pending() == 1
    assert queued == [[item.id]]


@pytest.mark.django_db(transaction=True)
def test_two_workers_detecting_the_same_pair_at_once_record_it_once(settings):
    import threading

    from django.db import connection

    settings.KNOWHUB_CONFLICT_DETECTION, settings.KNOWHUB_LLM_MODEL = True, ""
    no, yes = saved(PROBE_SAYS_NO, PROBE_SAYS_YES)
    errors, barrier = [], threading.Barrier(2)

    def detect(ids):
        try:
            barrier.wait(timeout=10)
            detect_for(knowledge_ids=ids)
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=detect, args=([item.id],)) for item in (no, yes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and Conflict.objects.count() == 1


@pytest.mark.django_db
def test_a_pair_merged_through_the_merge_review_settles_its_conflict_and_cannot_then_be_kept_both(detection, fake_openai,
                                                                                                  curator):
    no, yes, conflict = _open_conflict(fake_openai)  # a contradiction: no merge proposal links the conflict
    merged = curator.post("/api/merges/approve", {"ids": [no.id, yes.id], "task": "Probe", "content": "Check the process."},
                          format="json")
    assert merged.status_code in (200, 201), merged.json()
    settled = Conflict.objects.get(pk=conflict.id)
    assert settled.status == "merged" and settled.resolution == {"merged_id": merged.json()["id"]}
    kept = curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "keep_both"}, format="json")
    assert kept.status_code == 409 and not SlimRejection.objects.exists()  # no contradictory "never merge them"


@pytest.mark.django_db(transaction=True)
def test_reopening_a_merge_and_unmerging_it_at_once_never_deadlock(detection, fake_openai, curator):
    """Reopen locked the conflict, then the items; unmerge the items, then the conflict (3 of 6 rounds answered 503).
    Both take the items first now: one undoes the merge, the other finds it undone."""
    import threading

    from django.db import connections

    from knowledge.conflicts import conflict_reopen
    from knowledge.slim import knowledge_unmerge
    from tests.callers import acting

    errors = []
    for round_ in range(6):
        no, yes, conflict = _open_conflict(fake_openai)
        merged = curator.post(f"/api/conflicts/{conflict.id}/resolve",
                              {"action": "merge", "task": f"Probe {round_}", "content": "Check the process only."},
                              format="json").json()["resolution"]["merged_id"]
        start = threading.Barrier(2)

        def run(work):
            try:
                start.wait()
                work()
            except Exception as exc:  # noqa: BLE001 - the undone merge's loser: a state error, never a deadlock
                errors.append(exc)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=run, args=(lambda: conflict_reopen(acting("user:carl"), conflict_id=conflict.id),)),
                   threading.Thread(target=run, args=(lambda: knowledge_unmerge(acting("user:carl"), merged_id=merged),))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert Knowledge.objects.get(pk=merged).status == "archived" and Conflict.objects.get(pk=conflict.id).status == "open"
        Knowledge.objects.filter(pk__in=[no.id, yes.id, merged]).delete()
    assert not [e for e in errors if "deadlock" in str(e)], errors


@pytest.mark.django_db
def test_a_slim_jobs_merge_settles_the_conflict_between_its_items(detection, fake_openai):
    from knowledge.slim import merge_group
    from tests.callers import acting

    no, yes, conflict = _open_conflict(fake_openai)
    merged = merge_group(acting("job:slim:1"), sorted([no.id, yes.id]), text={"task": "Probe", "content": "Check."})
    settled = Conflict.objects.get(pk=conflict.id)
    assert settled.status == "merged" and settled.resolution == {"merged_id": merged.id}  # not left open for good


@pytest.mark.django_db
def test_a_pair_whose_items_went_into_different_merges_can_still_be_dismissed(detection, fake_openai, curator):
    from knowledge.slim import merge_group
    from tests.callers import acting

    no, yes, conflict = _open_conflict(fake_openai)
    [other] = saved(UNRELATED)
    merge_group(acting("user:carl"), sorted([no.id, other.id]), text={"task": "t", "content": "c"})
    dismissed = curator.post(f"/api/conflicts/{conflict.id}/resolve", {"action": "dismiss"}, format="json")
    assert dismissed.status_code == 200 and dismissed.json()["status"] == "dismissed"


@pytest.mark.django_db(transaction=True)
def test_reopening_two_conflicts_of_one_group_merge_at_once_never_deadlock():
    """A merge of three items settles each conflict among them; reopening two of them at once unmerges the group
    once. Reopen locked its pair and the merged item, then the unmerge the rest of the group: two reopens (or a
    reopen and an unmerge) held parts of the group each and waited for the other's."""
    import threading

    from django.db import connections

    from knowledge.conflicts import conflict_reopen
    from knowledge.slim import slim_approve
    from tests.callers import acting

    errors = []
    for round_ in range(6):
        a, b, c = (make_knowledge(task=f"Probe {round_} {n}", embed=False) for n in "abc")
        conflicts = [Conflict.objects.create(first_id=min(x.id, y.id), second_id=max(x.id, y.id), kind="duplicate",
                                             detected_for=y.id) for x, y in ((a, b), (b, c))]
        merged = slim_approve(acting("user:carl"), ids=[a.id, b.id, c.id], task="Probe", content="One probe.")
        assert set(Conflict.objects.filter(pk__in=[k.pk for k in conflicts]).values_list("status", flat=True)) == {"merged"}
        start = threading.Barrier(2)

        def run(conflict_id):
            try:
                start.wait()
                conflict_reopen(acting("user:carl"), conflict_id=conflict_id)
            except Exception as exc:  # noqa: BLE001 - collected: the assertion below names it
                errors.append(exc)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=run, args=(k.pk,)) for k in conflicts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert Knowledge.objects.get(pk=merged.id).status == "archived"
        assert set(Knowledge.objects.filter(pk__in=[a.id, b.id, c.id]).values_list("status", flat=True)) == {"active"}
    assert not [e for e in errors if "deadlock" in str(e)], errors


@pytest.mark.django_db
def test_a_reply_nested_hundreds_of_levels_deep_records_the_pair_as_close_for_a_person(detection, fake_openai):
    extra = "x"
    for _ in range(500):
        extra = {"a": extra}
    no, yes = saved(PROBE_SAYS_NO, PROBE_SAYS_YES)
    fake_openai.reply_json({"relation": "contradiction", "explanation": "opposite", "extra": extra})
    [conflict] = detect_for(knowledge_ids=[yes.id])
    assert conflict.kind == "close" and {conflict.first_id, conflict.second_id} == {no.id, yes.id}


@pytest.mark.django_db(transaction=True)
def test_an_item_deleted_while_its_pair_is_judged_is_skipped_and_the_check_does_not_fail(detection, fake_openai,
                                                                                        monkeypatch):
    """Found by bench.api_load, which deletes the items it saved: the worker's check crashed on the foreign key."""
    from knowledge import conflicts

    no, yes, other_no = saved(PROBE_SAYS_NO, PROBE_SAYS_YES, PROBE_IN_OTHER_WORDS)
    judge = conflicts.judge

    def judged_while_deleted(item, other):
        Knowledge.objects.filter(pk=other.pk).delete()  # committed at once: no surrounding transaction here
        return judge(item, other)

    monkeypatch.setattr(conflicts, "judge", judged_while_deleted)
    fake_openai.reply_json({"relation": "contradiction", "explanation": "opposite advice"})
    assert detect_for(knowledge_ids=[yes.id]) == []
    assert not Conflict.objects.exists() and Knowledge.objects.filter(pk=yes.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_an_item_deleted_after_its_pair_was_found_is_skipped(detection, settings, monkeypatch):
    from knowledge import conflicts

    settings.KNOWHUB_LLM_MODEL = ""
    no, yes = saved(PROBE_SAYS_NO, PROBE_SAYS_YES)
    close_pairs = conflicts.close_pairs

    def found_then_deleted(*args, **kwargs):
        pairs = close_pairs(*args, **kwargs)
        Knowledge.objects.filter(pk=no.pk).delete()
        return pairs

    monkeypatch.setattr(conflicts, "close_pairs", found_then_deleted)
    assert detect_for(knowledge_ids=[yes.id]) == [] and not Conflict.objects.exists()
