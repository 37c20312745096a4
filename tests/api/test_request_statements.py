"""What a REST request sends to the database, for the requests agents make most (issue 14's request floor):
the token in one statement, an item with its links and histories in one, a repeated search in three, a save
without rewriting its new row."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge.models import FeedbackCase, Knowledge
from knowledge.search import result_cache
from knowledge.search.indexing import index_keywords
from tests.callers import agent_client
from tests.factories import make_knowledge, make_resource

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent():
    client = agent_client("research_agent", ("org:acme",))
    client.get("/api/knowledge")  # the token's first use is written; later ones within a minute are not
    return client


def sent(client, method: str, path: str, body=None, status=200) -> tuple[dict, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = getattr(client, method)(path, body, format="json") if body is not None else getattr(client, method)(path)
    assert response.status_code == status, response.content
    return response.json(), [q["sql"] for q in captured.captured_queries]


def test_an_item_is_read_with_its_links_and_whole_histories_in_one_statement_after_the_token(agent):
    make_resource("res-1", scopes=["org:acme"])
    item = make_knowledge(scopes=["org:acme"], embed=False, resource_ids=["res-1"])
    FeedbackCase.objects.bulk_create([FeedbackCase(knowledge=item, kind="helpful" if n % 3 else "harmful",
                                                   case={"n": n}) for n in range(30)])
    newer = make_knowledge(scopes=["org:acme"], embed=False)
    Knowledge.objects.filter(pk=newer.pk).update(superseded_by=item, status="superseded")
    body, statements = sent(agent, "get", f"/api/knowledge/{item.id}")
    assert len(statements) == 2, statements  # the token, the item
    assert body["resource_ids"] == ["res-1"] and body["supersedes"] == [newer.id]
    assert body["eval"]["helpful_history"] == [{"n": n} for n in range(30) if n % 3]  # all of them, oldest first
    assert body["eval"]["harmful_history"] == [{"n": n} for n in range(30) if not n % 3]


def test_an_unknown_or_unreadable_item_is_404_after_two_statements(agent):
    hidden = make_knowledge(scopes=["org:beta"], embed=False)
    for knowledge_id in (hidden.id, "knowledge-20000101-none"):
        _, statements = sent(agent, "get", f"/api/knowledge/{knowledge_id}", status=404)
        assert len(statements) == 2


def test_a_save_stores_its_keyword_document_in_its_insert_not_an_update_after(agent):
    body, statements = sent(agent, "post", "/api/knowledge", {
        "task": "Rotate proxies when scraping", "content": "Switch proxy after a 429.", "types": ["strategy"],
        "tags": {"domain": "scraping"}}, status=201)
    assert not [s for s in statements if s.startswith('UPDATE "knowledge_knowledge"')], statements
    stored = Knowledge.objects.values("search_document", "script").get(pk=body["id"])
    index_keywords(item=Knowledge.objects.get(pk=body["id"]))  # what an edit computes from the same text
    assert Knowledge.objects.values("search_document", "script").get(pk=body["id"]) == stored
    assert stored["search_document"] and stored["script"]


@pytest.mark.django_db(transaction=True)  # the result cache keeps runs only outside a transaction that wrote
def test_a_repeated_search_is_the_token_the_generation_and_the_log(agent):
    result_cache._entries.clear()
    make_knowledge(task="Rotate proxies when scraping", content="Switch proxy after a 429.", embed=False)
    first, _ = sent(agent, "get", "/api/knowledge/search?q=rotate+proxies&min_score=1")
    again, statements = sent(agent, "get", "/api/knowledge/search?q=rotate+proxies&min_score=1")
    assert again["results"] == first["results"] and again["search_id"] != first["search_id"]
    assert len(statements) == 3, statements
    assert "knowhub_search_generation" in statements[1] and "INSERT" in statements[2]


def verb_and_table(sql: str) -> str:
    """`INSERT knowledge_knowledge`: the statement's verb and the first table it names (a transaction's: the verb)."""
    verb = sql.split(" ", 1)[0]
    return verb if verb in ("BEGIN", "SAVEPOINT", "RELEASE", "COMMIT") else f"{verb} {sql.split(chr(34))[1]}"


@pytest.mark.django_db(transaction=True)  # the chain's transaction is the outermost, as under a server
def test_a_save_takes_one_savepoint_the_one_its_insert_retries_a_taken_id_in_and_reads_nothing_back(agent):
    # the process's first publish learns which database the broker is on (knowhub_site/broker.py)
    sent(agent, "post", "/api/knowledge", {"task": "Warm", "content": "The first save.", "types": ["strategy"]}, status=201)
    body, statements = sent(agent, "post", "/api/knowledge", {
        "task": "Rotate proxies when scraping", "content": "Switch proxy after a 429.", "types": ["strategy"]}, status=201)
    kinds = [verb_and_table(s) for s in statements]
    assert kinds == ['SELECT agents_agenttoken', 'BEGIN', 'SAVEPOINT', 'INSERT knowledge_knowledge', 'RELEASE',
                     'INSERT agents_auditevent', 'COMMIT',
                     'SELECT webhooks_subscription'], statements
    assert Knowledge.objects.filter(pk=body["id"]).exists()
