"""The curation UI under hostile requests: a NUL character in a page's path, query string or form is a 400 page,
never a 500 (PostgreSQL's text cannot hold NUL, and pages pass ids and parameters to it)."""
import pytest

from tests.factories import make_knowledge, make_resource

pytestmark = pytest.mark.django_db

NUL = "\x00"


@pytest.mark.parametrize("path", [
    f"/knowledge/{NUL}/", f"/knowledge/{NUL}/edit/", f"/resources/{NUL}/", "/knowledge/?q=a" + NUL,
    "/knowledge/?tags=a=" + NUL, "/documents/?status=" + NUL, "/resources/?q=" + NUL, "/knowledge/?page=1" + NUL,
    "/playground/?token=" + NUL + "&q=x",
])
def test_a_nul_in_a_pages_path_or_query_is_a_400_page(curator_client, path):
    response = curator_client.get(path)
    assert response.status_code == 400, response.content[:300]
    assert b"Bad request" in response.content


@pytest.mark.parametrize("path", ["/knowledge/?q=%FF%FE", "/documents/?status=%C0%80", "/knowledge/?q%FF=1"])
def test_a_query_string_that_is_not_utf8_is_a_400_page(curator_client, path):
    response = curator_client.get(path)
    assert response.status_code == 400, response.content[:300]
    assert b"Bad request" in response.content


@pytest.mark.parametrize("form", [
    {"task": "t" + NUL, "content": "c", "types": ["tool"], "tags": "", "reason": "r"},
    {"task": "t", "content": "c", "types": ["tool"], "tags": "", "reason": "r", "extra" + NUL: "x"},
])
def test_a_nul_in_a_posted_form_is_a_400_and_changes_nothing(curator_client, form):
    item = make_knowledge(task="Old task", embed=False)
    response = curator_client.post(f"/knowledge/{item.id}/edit/", form)
    assert response.status_code == 400
    item.refresh_from_db()
    assert item.task == "Old task" and not item.versions.exists()


def test_pages_without_nul_are_untouched(curator_client):
    item = make_knowledge(task="Rotate the keys", embed=False)
    make_resource("code/x", scopes=["org:acme"])
    assert curator_client.get(f"/knowledge/{item.id}/").status_code == 200
    assert curator_client.get("/knowledge/?q=rotate").status_code == 200
    assert curator_client.get("/resources/code/x/").status_code == 200


@pytest.mark.parametrize("path", ["/documents/?page=50002", "/knowledge/?page=99999999999999999999999",
                                  "/audit/?page=99999999999999999999999"])
def test_a_page_number_past_any_offset_the_database_takes_is_answered(admin_client_, path, monkeypatch):
    from curation.views import common

    monkeypatch.setattr(common, "COUNT_UP_TO", 2)  # a list longer than is counted: its offset goes to the database
    for n in range(4):
        make_knowledge(task=f"Rotate the keys {n}", embed=False)
    assert admin_client_.get(path).status_code == 200


def test_a_session_cookie_holding_nul_is_a_new_session_not_a_500(client):
    client.cookies["sessionid"] = "\x00abcdefghijk"
    response = client.get("/knowledge/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_explain_panel_refuses_a_query_longer_than_a_search_takes(viewer_client):
    item = make_knowledge(task="Rotate the keys", embed=False)
    refused = viewer_client.get(f"/knowledge/{item.id}/explain/", {"q": "word " * 401})
    assert refused.status_code == 422 and b"at most 2000 characters" in refused.content
    assert viewer_client.get(f"/knowledge/{item.id}/explain/", {"q": "rotate keys"}).status_code == 200


@pytest.mark.parametrize("filters, problem", [("[" * 2400 + "]" * 2400, "nests deeper"),
                                              ('{"op": "EQ", "key": "tags.a", "value": "\\u0000"}', "NUL")])
def test_the_playgrounds_filters_are_refused_as_the_api_refuses_them(curator_client, filters, problem):
    from agents.services import agent_token_create

    token, _ = agent_token_create(agent_id="player", readable_scopes=["org:acme"], name="t")
    response = curator_client.get("/playground/", {"token": token.pk, "q": "keys", "filters": filters})
    assert response.status_code in (200, 422) and problem.encode() in response.content, response.content[-600:]
