"""The admin holds a new resource, and a changed one, to the API's rules for a saved resource (`ResourceInput`): a
refusal is an error on its field and nothing is stored."""
import json

import pytest

from resources.models import Resource
from tests.factories import make_resource
from tests.knowhub_site.test_admin import _change_form_data

pytestmark = pytest.mark.django_db

NEW = {"id": "code/rotate", "title": "rotate.sh", "body": "echo rotate", "content_type": "code", "metadata": "{}",
       "scopes": "org:acme", "owner": "", "expires_at_0": "", "expires_at_1": ""}

REFUSED = [
    ("scopes", "acme", "does not match the required pattern"),
    ("scopes", "org:acme,team b", "does not match the required pattern"),
    ("body", "b" * 1_000_001, "no more than 1000000 characters"),
    ("metadata", json.dumps(["not", "an", "object"]), "Expected a dictionary"),
    ("metadata", json.dumps({"expires_at": "next tuesday"}), "expires_at: Datetime has wrong format"),
]


@pytest.mark.parametrize("field, value, refusal", [*REFUSED, ("scopes", "", "at least 1 elements")])
def test_a_new_resource_the_api_would_refuse_is_an_error_on_its_field(client, curator, field, value, refusal):
    client.force_login(curator)

    response = client.post("/admin/resources/resource/add/", {**NEW, field: value})

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert refusal in " ".join(errors.get(field, [])), errors
    assert not Resource.objects.exists()


@pytest.mark.parametrize("field, value, refusal", REFUSED)
def test_a_change_the_api_would_refuse_is_an_error_on_its_field_and_nothing_is_stored(client, curator, field, value,
                                                                                      refusal):
    make_resource("code/rotate", title="rotate.sh", body="echo rotate", scopes=["org:acme"])
    client.force_login(curator)
    url = "/admin/resources/resource/code/rotate/change/"

    response = client.post(url, {**_change_form_data(client.get(url)), field: value})

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert refusal in " ".join(errors.get(field, [])), errors
    stored = Resource.objects.get(pk="code/rotate")
    assert (stored.body, stored.scopes, stored.metadata, stored.versions.count()) == ("echo rotate", ["org:acme"], {}, 0)


def test_a_resource_the_api_would_take_is_stored_control_characters_included(client, curator):
    client.force_login(curator)

    response = client.post("/admin/resources/resource/add/", {**NEW, "title": "feed\x01parser",
                                                               "scopes": "org:acme, team:feeds"})

    assert response.status_code == 302, response.context["adminform"].form.errors
    stored = Resource.objects.get(pk="code/rotate")
    assert (stored.title, stored.scopes) == ("feed\x01parser", ["org:acme", "team:feeds"])
