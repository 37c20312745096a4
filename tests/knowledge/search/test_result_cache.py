"""The agent search's result cache through the API: a repeated search skips the engine; after any committed
write to what a reply shows (items, their resource links, conflicts) the next search sees it
(knowledge/search/result_cache.py).

Transactional tests: the cache keeps nothing a transaction's own uncommitted writes could have shaped, so the
writes here commit as they do in production.
"""
import psycopg
import pytest
from django.db import transaction
from prometheus_client import REGISTRY

from ingest.importer import import_file
from knowledge import conflicts, feedback, services, slim, supersede
from knowledge.bulk import knowledge_bulk_create
from knowledge.models import Conflict, Knowledge, KnowledgeResource, SearchLog
from knowledge.search import engine, result_cache
from knowledge.search.embeddings import EmbedderError
from knowledge.search.indexing import embed_items
from tests.callers import acting, agent_client
from tests.conftest import database_url_for_subprocess
from tests.factories import make_knowledge, make_resource

pytestmark = pytest.mark.django_db(transaction=True)

# The gate open and every score allowed: what the engine ranks is what the reply shows.
OPEN = {"min_score": 1, "answer_floor": 0, "relevance_floor": 0, "relevance_ratio": 0}
PROXIES = ("Rotate proxies when scraping", "Switch to the next proxy after a 429 and back off for a minute.")


@pytest.fixture(autouse=True)
def empty_cache():
    result_cache._entries.clear()


@pytest.fixture
def engine_runs(monkeypatch):
    """The queries the engine ran, in order."""
    runs, real = [], engine.search

    def counted(**params):
        runs.append(params["query"])
        return real(**params)

    monkeypatch.setattr(engine, "search", counted)
    return runs


@pytest.fixture
def agent():
    return agent_client("cache_agent", ("org:acme",))


@pytest.fixture
def twins():
    """Two items with the same text (so the same relevance), embedded: their order is their quality's."""
    items = [make_knowledge(task=PROXIES[0], content=PROXIES[1], embed=False) for _ in range(2)]
    for item in items:  # one at a time: rows of one batch can differ in their last bits, and then so would relevance
        embed_items(items=[item])
    return items


def search(client, q="rotate proxies", **params) -> dict:
    response = client.get("/api/knowledge/search", {"q": q, **OPEN, **params})
    assert response.status_code == 200, response.content
    return response.json()


def ids(body: dict) -> list[str]:
    return [row["id"] for row in body["results"]]


def embedder_down(name=None):
    raise EmbedderError("down")  # the model service is down: the engine answers from keywords


def outcomes() -> dict:
    return {o: REGISTRY.get_sample_value("knowhub_search_cache_total", {"outcome": o}) or 0
            for o in ("hit", "miss", "uncached", "off")}


def test_a_repeated_search_is_answered_without_running_the_engine(agent, twins, engine_runs, monkeypatch):
    first = search(agent)
    assert engine_runs == ["rotate proxies"]

    def fail(**params):
        raise AssertionError("the engine ran for a repeated search")

    monkeypatch.setattr(engine, "search", fail)
    again = search(agent)
    assert again["results"] == first["results"]
    assert ids(again) == [item.id for item in sorted(twins, key=lambda i: i.id)]


def test_every_search_is_logged_under_a_fresh_search_id(agent, twins, engine_runs):
    replies = [search(agent) for _ in range(3)]
    assert len(engine_runs) == 1
    assert len({reply["search_id"] for reply in replies}) == 3
    logs = SearchLog.objects.filter(pk__in=[reply["search_id"] for reply in replies])
    assert [log.result_ids for log in logs] == [ids(replies[0])] * 3


def test_hits_misses_and_runs_that_cannot_be_kept_are_counted(agent, twins, monkeypatch, settings):
    before = outcomes()
    search(agent)
    search(agent)
    monkeypatch.setattr(engine, "get_embedder", embedder_down)
    search(agent, q="proxy after a 429")
    settings.KNOWHUB_SEARCH_CACHE = False
    search(agent)
    after = outcomes()
    assert {o: after[o] - before[o] for o in after} == {"hit": 1, "miss": 1, "uncached": 1, "off": 1}


def test_with_the_cache_off_every_search_runs_the_engine(agent, twins, engine_runs, settings):
    settings.KNOWHUB_SEARCH_CACHE = False
    search(agent)
    search(agent)
    assert len(engine_runs) == 2


def test_a_new_matching_item_is_found_by_the_next_search(agent, twins, engine_runs):
    assert len(search(agent)["results"]) == 2
    search(agent)
    new = make_knowledge(task="Rotate proxies per request", content="One proxy per request for the price pages.", embed=False)
    assert new.id in ids(search(agent))
    assert len(engine_runs) == 2


@pytest.mark.parametrize("write", [
    lambda item: feedback.feedback_record(acting(), knowledge_id=item.id, helpful=True, case={"task": "scrape"}),
    lambda item: feedback.score_set(acting(), knowledge_id=item.id, score=5),
], ids=["helpful case", "score"])
def test_feedback_and_score_reorder_the_next_search(agent, twins, write):
    first, second = ids(search(agent))
    assert ids(search(agent)) == [first, second]
    write(Knowledge.objects.get(pk=second))
    assert ids(search(agent)) == [second, first]


def test_an_archived_item_is_gone_from_the_next_search(agent, twins):
    assert len(search(agent)["results"]) == 2
    services.knowledge_set_status(acting(), knowledge_id=twins[0].id, status="archived")
    assert ids(search(agent)) == [twins[1].id]


def test_a_vector_stored_by_the_worker_finds_the_item_by_vector(agent, twins, engine_runs):
    weather = make_knowledge(task="天气查询工具的用法", content="调用天气接口时需要传入城市编码，返回未来七天的温度和降雨概率。", embed=False)
    query = "which API tells me if it will rain this week"  # no word in common: only its vector can find it
    assert weather.id not in ids(search(agent, q=query))
    assert weather.id not in ids(search(agent, q=query))
    embed_items(items=[weather])  # what the worker's embed_knowledge task stores
    assert weather.id in ids(search(agent, q=query))
    assert len(engine_runs) == 2


def test_callers_with_different_readable_scopes_never_share_an_entry(engine_runs):
    acme = make_knowledge(task=PROXIES[0], content=PROXIES[1], scopes=["org:acme"], embed=False)
    globex = make_knowledge(task=PROXIES[0], content=PROXIES[1], scopes=["org:globex"], embed=False)
    assert ids(search(agent_client("acme_agent", ("org:acme",)))) == [acme.id]
    assert ids(search(agent_client("globex_agent", ("org:globex",)))) == [globex.id]
    assert ids(search(agent_client("nobody", ("org:initech",)))) == []
    assert len(engine_runs) == 3


def test_a_tokens_static_filters_are_part_of_the_key(engine_runs):
    tool = make_knowledge(task=PROXIES[0], content=PROXIES[1], types=["tool"], embed=False)
    plan = make_knowledge(task=PROXIES[0], content=PROXIES[1], types=["plan"], embed=False)
    everything = agent_client("all_agent", ("org:acme",))
    planner = agent_client("planner", ("org:acme",), static_filters={"op": "EQ", "key": "types", "value": "plan"})
    assert sorted(ids(search(everything))) == sorted([tool.id, plan.id])
    assert ids(search(planner)) == [plan.id]
    assert len(engine_runs) == 2


def test_an_explained_search_from_the_cache_explains_as_the_run_did(agent, twins, engine_runs):
    first = search(agent, explain="true")
    again = search(agent, explain="true")
    assert len(engine_runs) == 1
    assert [row["explanation"] for row in again["results"]] == [row["explanation"] for row in first["results"]]
    assert all(row["explanation"]["relevance"] == row["relevance"] for row in again["results"])


def test_a_conflict_raised_between_two_hits_shows_in_the_next_search(agent, twins):
    assert "conflicts" not in search(agent)["results"][0]
    first, second = sorted(item.id for item in twins)
    conflict = Conflict.objects.create(first_id=first, second_id=second, kind="contradiction", detected_for=second)
    rows = search(agent)["results"]
    assert rows[0]["conflicts"] == [{"conflict_id": conflict.id, "kind": "contradiction", "with": rows[1]["id"]}]
    conflicts.conflict_resolve(acting(), conflict_id=conflict.id, action="dismiss")
    assert all("conflicts" not in row for row in search(agent)["results"])


def test_a_resource_linked_to_a_hit_shows_in_the_next_search(agent, twins):
    assert [row["resource_ids"] for row in search(agent)["results"]] == [[], []]
    KnowledgeResource.objects.create(knowledge=twins[0], resource=make_resource("code/proxies/rotate"), position=0)
    rows = {row["id"]: row["resource_ids"] for row in search(agent)["results"]}
    assert rows == {twins[0].id: ["code/proxies/rotate"], twins[1].id: []}


def test_a_degraded_run_is_not_kept(agent, twins, engine_runs, monkeypatch):
    real = engine.get_embedder
    monkeypatch.setattr(engine, "get_embedder", embedder_down)
    search(agent, explain="true")
    assert search(agent, explain="true")["notes"] == ["vector search unavailable (down); keyword results only"]
    monkeypatch.setattr(engine, "get_embedder", real)  # the model service is back: no write follows
    assert "notes" not in search(agent, explain="true")
    search(agent, explain="true")
    assert len(engine_runs) == 3


def test_a_write_from_another_connection_retires_the_entry(agent, twins):
    assert len(search(agent)["results"]) == 2
    with psycopg.connect(database_url_for_subprocess(), autocommit=True) as other:  # another process, plain SQL
        other.execute("UPDATE knowledge_knowledge SET status = 'archived' WHERE id = %s", [twins[0].id])
    assert ids(search(agent)) == [twins[1].id]


def test_no_run_is_kept_while_another_transaction_has_written(agent, twins, engine_runs):
    with psycopg.connect(database_url_for_subprocess()) as other:
        other.execute("UPDATE knowledge_knowledge SET score = 5 WHERE id = %s", [twins[0].id])  # not committed yet
        assert result_cache.generation()[1] is False
        search(agent)
        search(agent)
        assert len(engine_runs) == 2  # either run could have seen rows that are about to change
        other.rollback()
    search(agent)
    search(agent)
    assert len(engine_runs) == 3


def test_a_transaction_that_wrote_never_keeps_its_own_runs(agent, twins, engine_runs):
    class RolledBack(Exception):
        pass

    with pytest.raises(RolledBack), transaction.atomic():
        services.knowledge_set_status(acting(), knowledge_id=twins[0].id, status="archived")
        assert ids(search(agent)) == [twins[1].id]
        assert ids(search(agent)) == [twins[1].id]
        assert len(engine_runs) == 2
        raise RolledBack
    assert len(search(agent)["results"]) == 2  # the archive never happened, and no entry says it did


def _merged(a, b):
    return slim.merge_group(acting(), [a.id, b.id], text={"task": "Rotate proxies", "content": "Merged advice."})


def _archived(a, b):
    services.knowledge_set_status(acting(), knowledge_id=a.id, status="archived")


def _edited(a, b):
    services.knowledge_edit(acting(), knowledge_id=a.id, content="Rotate proxies on every 429 reply.", reason="test")


def _superseded(a, b):
    supersede.knowledge_supersede(acting(), knowledge_id=a.id, successor_id=b.id)


def _conflict(a, b):
    first, second = sorted([a.id, b.id])
    return Conflict.objects.create(first_id=first, second_id=second, kind="contradiction", detected_for=second)


def _unembedded(a, b):
    return make_knowledge(task="Proxy pools for scraping", content="Keep a pool of proxies.", embed=False)


WRITES = {  # name: (what the data needs first, the write under test)
    "save": (None, lambda a, b, _: make_knowledge(task="Rotate proxies", content="Daily.", embed=False)),
    "edit": (None, lambda a, b, _: _edited(a, b)),
    "restore a version": (_edited, lambda a, b, _: services.knowledge_restore_version(acting(), knowledge_id=a.id, number=1)),
    "archive": (None, lambda a, b, _: _archived(a, b)),
    "activate": (_archived, lambda a, b, _: services.knowledge_set_status(acting(), knowledge_id=a.id, status="active")),
    "admin field change": (None, lambda a, b, _: services.knowledge_change_fields(acting(), knowledge_id=a.id,
                                                                                  changes={"confidence": 0.9})),
    "merge": (None, lambda a, b, _: _merged(a, b)),
    "unmerge": (_merged, lambda a, b, merged: slim.knowledge_unmerge(acting(), merged_id=merged.id)),
    "supersede": (None, lambda a, b, _: _superseded(a, b)),
    "unsupersede": (_superseded, lambda a, b, _: supersede.knowledge_unsupersede(acting(), knowledge_id=a.id)),
    "helpful case": (None, lambda a, b, _: feedback.feedback_record(acting(), knowledge_id=a.id, helpful=True)),
    "harmful case": (None, lambda a, b, _: feedback.feedback_record(acting(), knowledge_id=a.id, helpful=False)),
    "score": (None, lambda a, b, _: feedback.score_set(acting(), knowledge_id=a.id, score=1)),
    "vector stored": (_unembedded, lambda a, b, pending: embed_items(items=[pending])),
    "bulk insert": (None, lambda a, b, _: knowledge_bulk_create(
        acting(), [{"task": "Rotate proxies", "content": "In bulk.", "types": ["tool"], "scopes": ["org:acme"]}],
        embed=False)),
    "import": (None, lambda a, b, _: import_file(acting(), name="proxies.md", scopes=["org:acme"],
                                                 data=b"# Rotate proxies\n\nRotate them after every 429 reply.\n")),
    "delete": (None, lambda a, b, _: Knowledge.objects.filter(pk=a.id).delete()),
    "resource linked": (lambda a, b: make_resource("code/proxies/rotate"),
                        lambda a, b, resource: KnowledgeResource.objects.create(knowledge=a, resource=resource, position=0)),
    "conflict raised": (None, lambda a, b, _: _conflict(a, b)),
    "conflict resolved": (_conflict, lambda a, b, conflict: conflicts.conflict_resolve(
        acting(), conflict_id=conflict.id, action="keep_both")),
}


@pytest.mark.parametrize("name", WRITES)
def test_every_kind_of_write_makes_the_next_search_run_again(agent, twins, engine_runs, name):
    prepare, write = WRITES[name]
    prepared = prepare(*twins) if prepare else None
    search(agent)
    search(agent)
    assert len(engine_runs) == 1
    before = result_cache.generation()[0]
    with transaction.atomic():  # one committed write, as each service makes it
        write(*twins, prepared)
    assert result_cache.generation()[0] > before
    search(agent)
    assert len(engine_runs) == 2
