"""Nothing coerced: a JSON body's value of the wrong JSON type is a 400 naming the field; a query string's numbers
are ASCII digits ("5", not "５", "١٠" or "5.0")."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.models import Knowledge
from tests.api.test_hostile_input import SAVE, assert_invalid
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("body", "field"), [
    ({"q": 123}, "q"),
    ({"q": "x", "top_k": "5"}, "top_k"),
    ({"q": "x", "top_k": 5.0}, "top_k"),
    ({"q": "x", "top_k": True}, "top_k"),
    ({"q": "x", "min_score": "3"}, "min_score"),
    ({"q": "x", "answer_floor": "0.5"}, "answer_floor"),
    ({"q": "x", "relevance_ratio": False}, "relevance_ratio"),
    ({"q": "x", "scopes": [5]}, "scopes.0"),
])
def test_a_search_body_refuses_a_value_of_the_wrong_json_type(agent, body, field):
    assert_invalid(agent.post("/api/knowledge/search", body, format="json"), field)


@pytest.mark.parametrize(("change", "field"), [
    ({"task": 123}, "task"),
    ({"content": 1.5}, "content"),
    ({"score": 4.0}, "score"),
    ({"score": True}, "score"),
    ({"score": "４"}, "score"),
    ({"eval": {"confidence": True}}, "eval.confidence"),
    ({"eval": {"confidence": "0.9"}, "score": "x"}, "score"),
    ({"score": "5"}, "score"),  # text is read as a number only from a CSV cell (the import's)
    ({"eval": {"score": "4"}}, "eval.score"),
    ({"eval": {"confidence": "0.5"}}, "eval.confidence"),
    ({"owner": 7}, "owner"),
    ({"tags": {"w": 1}}, "tags.w"),
    ({"source": {"name": 5}}, "source.name"),
    ({"message_id": False}, "message_id"),
])
def test_a_save_refuses_a_value_of_the_wrong_json_type(agent, change, field):
    assert_invalid(agent.post("/api/knowledge", {**SAVE, **change}, format="json"), field)
    assert not Knowledge.objects.exists()


def test_a_save_still_takes_score_and_confidence_as_json_numbers(agent):
    saved = agent.post("/api/knowledge", {**SAVE, "score": 4, "eval": {"confidence": 1}}, format="json")
    assert saved.status_code == 201 and (saved.json()["eval"]["score"], saved.json()["eval"]["confidence"]) == (4, 1.0)


DOCUMENT = {"content": "# Deploy\n\nRun the script.", "filename": "deploy.md"}


@pytest.mark.parametrize(("change", "field"), [
    ({"chunk_size": "500"}, "chunk_size"),
    ({"chunk_size": 500.0}, "chunk_size"),
    ({"chunk_overlap": "10"}, "chunk_overlap"),
    ({"content": 123}, "content"),
    ({"filename": ["deploy.md"]}, "filename"),
    ({"scopes": [7]}, "scopes.0"),
])
def test_a_document_body_refuses_a_value_of_the_wrong_json_type(agent, change, field):
    assert_invalid(agent.post("/api/documents", {**DOCUMENT, **change}, format="json"), field)


def test_a_document_form_still_takes_its_numbers_as_the_forms_text(agent):
    def form(**numbers):
        upload = SimpleUploadedFile("deploy.md", b"# Deploy\n\nRun the script.", content_type="text/markdown")
        return {"file": upload, "chunk_overlap": "10", **numbers}

    response = agent.post("/api/documents", form(chunk_size="500"), format="multipart")
    assert response.status_code == 202, response.content[:300]
    assert_invalid(agent.post("/api/documents", form(chunk_size="five hundred"), format="multipart"), "chunk_size")


@pytest.mark.parametrize(("body", "field"), [
    ({"update_score": "5"}, "update_score"),
    ({"update_score": 5.0}, "update_score"),
    ({"evolve_feedback": 1}, "evolve_feedback"),
])
def test_feedback_refuses_a_value_of_the_wrong_json_type(agent, body, field):
    item = make_knowledge()
    assert_invalid(agent.put(f"/api/knowledge/{item.id}", body, format="json"), field)


def test_a_batch_entry_with_a_numeric_knowledge_id_fails_naming_it(agent):
    response = agent.post("/api/knowledge/batch_update", {"feedback_list": [{"knowledge_id": 5, "is_helpful": True}]},
                          format="json")
    result = response.json()["results"][0]
    assert response.status_code == 200 and not result["ok"]
    assert result["error"]["message"].startswith("feedback_list.0.knowledge_id: ")


@pytest.mark.parametrize(("body", "field"), [
    ({"id": 5, "title": "t"}, "id"),
    ({"id": "code/x", "title": 5}, "title"),
    ({"id": "code/x", "title": "t", "secure_body": 1234}, "secure_body"),
    ({"id": "code/x", "title": "t", "scopes": [1]}, "scopes.0"),
])
def test_a_resource_save_refuses_a_value_of_the_wrong_json_type(agent, body, field):
    assert_invalid(agent.post("/api/resource", body, format="json"), field)


@pytest.mark.parametrize(("url", "query", "field"), [
    ("/api/knowledge/search", {"q": "x", "top_k": "５"}, "top_k"),  # full-width
    ("/api/knowledge/search", {"q": "x", "top_k": "5.0"}, "top_k"),
    ("/api/knowledge/search", {"q": "x", "top_k": " 5"}, "top_k"),
    ("/api/knowledge/search", {"q": "x", "min_score": "３"}, "min_score"),
    ("/api/knowledge/search", {"q": "x", "answer_floor": "٠.٥"}, "answer_floor"),  # Arabic-Indic
    ("/api/knowledge/search", {"q": "x", "answer_floor": "nan"}, "answer_floor"),
    ("/api/knowledge", {"limit": "١٠"}, "limit"),
    ("/api/knowledge", {"limit": "1_0"}, "limit"),
])
def test_query_string_numbers_are_ascii_digits_only(agent, url, query, field):
    assert_invalid(agent.get(url, query), field)


def test_query_string_numbers_in_ascii_digits_are_taken(agent):
    make_knowledge(task="Deploy the staging proxy", content="Deploy the staging proxy", scopes=["org:acme"], embed=False)
    search = agent.get("/api/knowledge/search", {"q": "staging proxy", "top_k": "5", "min_score": "1",
                                                 "answer_floor": "0.0", "relevance_floor": "0", "relevance_ratio": ".5"})
    assert search.status_code == 200 and search.json()["count"] == 1, search.content[:300]
    listed = agent.get("/api/knowledge", {"limit": "10"})
    assert listed.status_code == 200 and listed.json()["count"] == 1
