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
