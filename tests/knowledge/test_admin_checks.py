"""The admin holds a changed item to the API's rules for each field: a refusal is an error on that field and
nothing is stored."""
import json

import pytest

from knowledge.limits import CONTENT_MAX, TASK_MAX
from knowledge.models import Knowledge
from tests.factories import make_knowledge
from tests.knowhub_site.test_admin import _change_form_data

pytestmark = pytest.mark.django_db


def _post_change(client, item, **fields):
    url = f"/admin/knowledge/knowledge/{item.pk}/change/"
    return client.post(url, {**_change_form_data(client.get(url)), **fields})


@pytest.mark.parametrize("field, value, refusal", [
    ("scopes", "acme", "scopes look like kind:name"),
    ("scopes", "org:acme,user bob", "scopes look like kind:name"),
    ("task", "t" * (TASK_MAX + 1), f"no more than {TASK_MAX} characters"),
    ("content", "c" * (CONTENT_MAX + 1), f"no more than {CONTENT_MAX} characters"),
    ("source", json.dumps({"name": "runbook", "urls": ["javascript:alert(document.cookie)"]}),
     "urls.0: must be an http:// or https:// URL"),
    ("source", json.dumps({"urls": ["https://ok.example", "vbscript:msgbox(1)"]}), "urls.1: must be an http"),
    ("source", json.dumps({"nmae": "typo"}), "nmae: unknown field"),
    ("tags", json.dumps({"two words": "x"}), "tag name 'two words'"),
    ("tags", json.dumps({"domain": 7}), "domain: must be a string"),
    ("confidence", "1.5", "less than or equal to 1"),
])
def test_a_change_the_api_would_refuse_is_an_error_on_its_field_and_nothing_is_stored(client, curator, field, value,
                                                                                       refusal):
    item = make_knowledge(task="Rotate the keys", content="Monthly.", source={"urls": ["https://wiki.example/keys"]})
    client.force_login(curator)

    response = _post_change(client, item, **{field: value})

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert refusal in " ".join(errors.get(field, [])), errors
    stored = Knowledge.objects.get(pk=item.pk)
    assert (stored.task, stored.content, stored.scopes, stored.source["urls"], stored.versions.count()) == (
        "Rotate the keys", "Monthly.", ["org:acme"], ["https://wiki.example/keys"], 0)


def test_a_change_the_api_would_take_is_stored_control_characters_and_kept_tag_names_included(client, curator):
    """The API takes C0 characters other than NUL in text, and an edit keeps tag names an item has already."""
    item = make_knowledge(task="Parse the feed", tags={"legacy name": "kept"})
    client.force_login(curator)

    response = _post_change(client, item, content="split on \x1f unit separators", scopes="org:acme,team:feeds",
                            source=json.dumps({"name": "feed docs", "urls": ["https://wiki.example/feed"]}))

    assert response.status_code == 302, response.context["adminform"].form.errors
    stored = Knowledge.objects.get(pk=item.pk)
    assert (stored.content, stored.scopes, stored.tags) == ("split on \x1f unit separators", ["org:acme", "team:feeds"],
                                                            {"legacy name": "kept"})
    assert stored.source["urls"] == ["https://wiki.example/feed"]


def test_a_document_items_source_keeps_the_hubs_own_document_key(client, curator):
    item = make_knowledge(source={"name": "runbook.md", "document": {"kind": "markdown", "uri": "runbook.md"}})
    client.force_login(curator)
    source = {**Knowledge.objects.get(pk=item.pk).source, "name": "Runbook"}

    response = _post_change(client, item, source=json.dumps(source))

    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Knowledge.objects.get(pk=item.pk).source["document"] == {"kind": "markdown", "uri": "runbook.md"}


@pytest.mark.parametrize("field, value, refusal", [
    ("tags", '{"a": "\\ud800"}', "a: "),
    ("source", '{"name": "\\udfff"}', "name: "),
    ("source", '{"name": "nul \\u0000 here"}', "name: "),
    ("tags", '{"\\ud800": "x"}', "a key"),
])
def test_a_json_field_holding_a_lone_surrogate_or_nul_is_an_error_on_its_field_shown_again_safely(
        client, curator, field, value, refusal):
    """Django's JSONField parses `\\ud800` and wrote it back into the page raw: a 500 encoding the error page."""
    item = make_knowledge(task="Rotate the keys", content="Monthly.", tags={"domain": "ops"})
    client.force_login(curator)

    response = _post_change(client, item, **{field: value})

    assert response.status_code == 200
    page = response.content.decode()  # encodes: no lone surrogate reached the page
    assert refusal in " ".join(response.context["adminform"].form.errors.get(field, []))
    assert value.replace('"', "&quot;") in page  # what was typed is shown again, as typed, to correct
    stored = Knowledge.objects.get(pk=item.pk)
    assert (stored.tags, stored.versions.count()) == ({"domain": "ops"}, 0)


def test_a_merged_items_text_is_not_changed_in_the_admin_either(client, curator):
    from knowledge import slim
    from tests.callers import acting

    a, b = make_knowledge(task="Tabs please", content="tabs in Makefiles"), make_knowledge(task="Use tabs")
    merged = slim.slim_approve(acting("user:carl"), ids=[a.id, b.id], task="Tabs", content="Indent with tabs")
    client.force_login(curator)

    response = _post_change(client, Knowledge.objects.get(pk=a.id), content="patched while merged")

    assert response.status_code == 200
    assert merged.id in " ".join(response.context["adminform"].form.non_field_errors())
    assert Knowledge.objects.get(pk=a.id).content == "tabs in Makefiles"
