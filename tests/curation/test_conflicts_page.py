"""The Conflicts page: the empty state, what a viewer sees (no actions), status tabs, the item page's links."""
import pytest
from django.test import Client

from knowledge.models import Conflict
from tests.callers import person_in
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


def signed_in(django_user_model, role, name):
    client = Client()
    client.force_login(person_in(django_user_model, role, name))
    return client


def a_conflict(kind="contradiction"):
    a = make_knowledge(task="Liveness probe", content="Do not check the database.", embed=False)
    b = make_knowledge(task="Liveness probe", content="Check the database.", embed=False)
    first, second = sorted([a.id, b.id])
    return Conflict.objects.create(first_id=first, second_id=second, kind=kind, detected_for=b.id,
                                   explanation="They disagree about the database.")


def test_with_no_conflicts_the_page_says_so(django_user_model):
    page = signed_in(django_user_model, "viewer", "vera").get("/conflicts/").content.decode()
    assert "No open conflicts" in page


def test_a_viewer_sees_both_items_and_the_reason_but_no_actions(django_user_model):
    conflict = a_conflict()
    page = signed_in(django_user_model, "viewer", "vera").get("/conflicts/").content.decode()
    assert "They disagree about the database." in page and conflict.first_id in page and conflict.second_id in page
    assert f"/conflicts/{conflict.id}/resolve/" not in page and ">Newer supersedes older<" not in page


def test_a_curator_gets_the_actions_and_settled_conflicts_move_to_their_tab(django_user_model):
    conflict = a_conflict()
    curator = signed_in(django_user_model, "curator", "carl")
    assert "Newer supersedes older" in curator.get("/conflicts/").content.decode()
    done = curator.post(f"/conflicts/{conflict.id}/resolve/", {"action": "keep_both"}, HTTP_HX_REQUEST="true")
    assert done.status_code == 200 and "Done: kept both" in done.content.decode()
    assert "No open conflicts" in curator.get("/conflicts/").content.decode()
    kept = curator.get("/conflicts/?status=kept_both").content.decode()
    assert "They disagree about the database." in kept and "Reopen" in kept
    again = curator.post(f"/conflicts/{conflict.id}/resolve/", {"action": "dismiss"}, HTTP_HX_REQUEST="true")
    assert again.status_code == 409 and "already kept_both" in again.content.decode()


def test_the_dashboard_counts_open_conflicts(django_user_model):
    a_conflict()
    page = signed_in(django_user_model, "viewer", "vera").get("/").content.decode()
    assert "1 open conflict between items" in page


def test_the_item_page_links_its_open_conflicts(django_user_model):
    conflict = a_conflict()
    page = signed_in(django_user_model, "viewer", "vera").get(f"/knowledge/{conflict.first_id}/").content.decode()
    assert "Open conflicts" in page and f"#conflict-{conflict.id}" in page


def test_a_refused_merge_text_is_said_on_the_card_not_a_500(django_user_model):
    conflict = a_conflict()
    curator = signed_in(django_user_model, "curator", "carl")
    too_long = curator.post(f"/conflicts/{conflict.id}/resolve/", {"action": "merge", "task": "t", "content": "x" * 100_001},
                            HTTP_HX_REQUEST="true")
    assert too_long.status_code == 422 and "content" in too_long.content.decode()
    bogus = curator.post(f"/conflicts/{conflict.id}/resolve/", {"action": "explode"}, HTTP_HX_REQUEST="true")
    assert bogus.status_code == 422 and "action" in bogus.content.decode()
    assert Conflict.objects.get().status == "open"
