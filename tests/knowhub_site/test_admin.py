import pytest

from tests.factories import make_knowledge, make_resource
from tests.callers import acting

pytestmark = pytest.mark.django_db


def test_anonymous_user_is_sent_to_admin_login(client):
    response = client.get("/admin/knowledge/knowledge/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_curator_sees_knowledge_with_quality_and_can_filter_by_type(client, curator):
    make_knowledge(task="Selenium login bypass", types=["tool"], score=4, helpful=3, harmful=1)
    make_knowledge(task="User prefers tabs", types=["user_profile"])
    client.force_login(curator)

    listing = client.get("/admin/knowledge/knowledge/").content.decode()
    assert "Selenium login bypass" in listing and "User prefers tabs" in listing

    filtered = client.get("/admin/knowledge/knowledge/?type=user_profile").content.decode()
    assert "User prefers tabs" in filtered and "Selenium login bypass" not in filtered

    searched = client.get("/admin/knowledge/knowledge/?q=selenium").content.decode()
    assert "Selenium login bypass" in searched and "User prefers tabs" not in searched

    by_quality = client.get("/admin/knowledge/knowledge/?o=7").status_code
    assert by_quality == 200


def test_curator_opens_an_item_with_its_resources(client, curator):
    make_resource("code/selenium/login", content_type="code")
    item = make_knowledge(resource_ids=["code/selenium/login"])
    client.force_login(curator)
    page = client.get(f"/admin/knowledge/knowledge/{item.pk}/change/")
    assert page.status_code == 200
    assert "code/selenium/login" in page.content.decode()


def test_admin_never_shows_a_secret(client, curator):
    make_resource("credentials/site", content_type="credential", secure_body="hunter2-very-secret")
    client.force_login(curator)
    for url in ["/admin/resources/resource/", "/admin/resources/resource/credentials/site/change/"]:
        page = client.get(url)
        assert page.status_code == 200
        assert "hunter2-very-secret" not in page.content.decode()


def test_ensure_curator_prints_a_password_that_logs_in_to_the_admin(client):
    import io
    import re

    from django.core.management import call_command

    out = io.StringIO()
    call_command("ensure_curator", stdout=out)
    password = re.search(r"with password: (\S+)", out.getvalue()).group(1)
    login = client.get("/admin/login/")
    response = client.post(
        "/admin/login/?next=/admin/",
        {"username": "curator", "password": password, "csrfmiddlewaretoken": login.cookies["csrftoken"].value},
        follow=True,
    )
    page = response.content.decode()
    assert "Knowledge" in page and "Resources" in page
    again = io.StringIO()
    call_command("ensure_curator", stdout=again)
    assert "exists" in again.getvalue() and password not in again.getvalue()


def test_two_curators_never_get_the_same_generated_password(django_user_model):
    import io
    import re

    from django.core.management import call_command

    first, second = io.StringIO(), io.StringIO()
    call_command("ensure_curator", "--username", "one", stdout=first)
    call_command("ensure_curator", "--username", "two", stdout=second)
    grab = lambda out: re.search(r"with password: (\S+)", out.getvalue()).group(1)  # noqa: E731
    assert grab(first) != grab(second)


def test_a_curator_creates_an_agent_token_in_the_admin_and_it_works(client, curator):
    from rest_framework.test import APIClient

    from agents.models import AgentToken

    client.force_login(curator)
    response = client.post("/admin/agents/agenttoken/add/", {
        "agent_id": "research_agent", "name": "laptop", "readable_scopes": "org:acme", "writable_scopes": "org:acme",
        "static_filters": "", "is_active": "on",
    }, follow=True)
    page = response.content.decode()
    key = page.split("Token for agent:research_agent: ")[1].split(" ")[0]
    token = AgentToken.objects.get()
    assert token.key_prefix == key[:10] and key not in str(AgentToken.objects.values_list())
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert api.get("/api/knowledge/search", {"q": "x"}).status_code == 200


def test_admin_refuses_a_token_with_a_bad_static_filter(client, curator):
    from agents.models import AgentToken

    client.force_login(curator)
    response = client.post("/admin/agents/agenttoken/add/", {
        "agent_id": "a", "readable_scopes": "org:acme", "writable_scopes": "", "is_active": "on",
        "static_filters": '{"op": "EQ", "key": "colour", "value": "red"}',
    })
    assert response.status_code == 200 and "unknown filter key" in response.content.decode().lower()
    assert not AgentToken.objects.exists()


def _change_form_data(response) -> dict:
    """The POST body the admin's change form would send back unchanged (fields and inline management forms)."""
    form = response.context["adminform"].form
    data = {}
    for name in form.fields:
        value = form[name].value()  # already as the widget shows it (JSON text, comma-separated lists)
        if value is not None:
            data[name] = value
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        for key, value in formset.management_form.initial.items():
            data[f"{formset.prefix}-{key}"] = value
        for index, inline_form in enumerate(formset.initial_forms):
            data[f"{formset.prefix}-{index}-{formset.model._meta.pk.name}"] = inline_form.instance.pk
            data[f"{formset.prefix}-{index}-knowledge"] = inline_form.instance.knowledge_id
    return data


def test_an_admin_edit_keeps_the_old_text_as_a_version_re_embeds_and_is_audited(client, curator):
    from agents.models import AuditEvent
    from knowledge.models import Knowledge
    from tests.factories import embed_saved

    item = make_knowledge(task="Rotate the keys", content="Rotate monthly.")
    embed_saved()
    assert Knowledge.objects.get(pk=item.pk).embedding is not None
    client.force_login(curator)
    url = f"/admin/knowledge/knowledge/{item.pk}/change/"
    data = {**_change_form_data(client.get(url)), "content": "Rotate weekly.", "score": 4}

    response = client.post(url, data)

    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else response
    item.refresh_from_db()
    assert (item.content, item.score, item.embedding) == ("Rotate weekly.", 4, None)  # the worker embeds the new text
    version = item.versions.get()
    assert (version.content, version.changed_by, version.reason) == ("Rotate monthly.", "user:alice", "edited in the admin")
    event = AuditEvent.objects.get(operation="admin_knowledge_change")
    assert event.target == item.pk and set(event.args) == {"content", "score"}


def test_the_admin_archives_instead_of_deleting_and_can_make_active_again(client, curator):
    from agents.models import AuditEvent
    from knowledge.models import Knowledge

    item = make_knowledge()
    client.force_login(curator)
    assert client.get(f"/admin/knowledge/knowledge/{item.pk}/delete/").status_code == 403
    listing = client.get("/admin/knowledge/knowledge/").content.decode()
    assert "delete_selected" not in listing and 'value="archive"' in listing

    client.post("/admin/knowledge/knowledge/", {"action": "archive", "_selected_action": [item.pk]})
    assert Knowledge.objects.get(pk=item.pk).status == "archived"
    client.post("/admin/knowledge/knowledge/", {"action": "make_active", "_selected_action": [item.pk]})
    assert Knowledge.objects.get(pk=item.pk).status == "active"
    assert list(AuditEvent.objects.order_by("at").values_list("operation", flat=True)) == [  # the operations' audit
        "knowledge_archive", "knowledge_activate"]


def test_make_active_brings_a_superseded_item_back_as_the_api_does_and_reopens_its_conflict(client, curator):
    from knowledge.models import Conflict, Knowledge

    first, second = sorted([make_knowledge(task="probe the db"), make_knowledge(task="probe the database")],
                           key=lambda item: item.pk)
    Knowledge.objects.filter(pk=first.pk).update(status="superseded", superseded_by=second)
    conflict = Conflict.objects.create(first=first, second=second, kind="duplicate", status="superseded",
                                       detected_for=second.pk, resolved_by="user:alice",
                                       resolution={"superseded": first.pk, "successor": second.pk})
    client.force_login(curator)

    response = client.post("/admin/knowledge/knowledge/", {"action": "make_active", "_selected_action": [first.pk]},
                           follow=True)

    assert f"Made active 1: {first.pk}" in response.content.decode()
    back = Knowledge.objects.get(pk=first.pk)
    assert (back.status, back.superseded_by_id) == ("active", None)
    assert (Conflict.objects.get(pk=conflict.pk).status, Conflict.objects.get(pk=conflict.pk).resolution) == ("open", {})


def test_the_admin_never_archives_a_merged_item_or_deletes_a_resource(client, curator):
    from knowledge.models import Knowledge

    merged = make_knowledge(task="merged one")
    Knowledge.objects.filter(pk=merged.pk).update(status="merged")
    make_resource("code/login")
    client.force_login(curator)
    response = client.post("/admin/knowledge/knowledge/", {"action": "archive", "_selected_action": [merged.pk]},
                           follow=True)
    assert Knowledge.objects.get(pk=merged.pk).status == "merged" and "unmerge" in response.content.decode()
    assert client.get("/admin/resources/resource/code/login/delete/").status_code == 403
    version = make_knowledge(task="versioned").versions.create(number=1, task="t", content="c", changed_by="user:alice")
    assert client.get(f"/admin/knowledge/knowledgeversion/{version.pk}/delete/").status_code == 403


def test_an_admin_resource_edit_keeps_the_old_state_and_its_secret(client, curator):
    from agents.models import AuditEvent
    from resources.models import Resource
    from resources.services import resource_version_reveal

    make_resource("credentials/site", title="old title", content_type="credential", secure_body="pw-1",
                  scopes=["org:acme"])
    client.force_login(curator)
    url = "/admin/resources/resource/credentials/site/change/"
    response = client.post(url, {**_change_form_data(client.get(url)), "title": "new title"})

    assert response.status_code == 302
    resource = Resource.objects.get(pk="credentials/site")
    assert resource.title == "new title" and resource.secure_body == "pw-1"
    version = resource.versions.get()
    assert version.title == "old title"
    assert resource_version_reveal(acting("user:alice", can_read_secrets=True), version=version, remote_addr=None) == "pw-1"
    assert AuditEvent.objects.get().operation == "admin_resource_change"


def test_a_resources_metadata_holding_a_lone_surrogate_is_an_error_on_the_field_not_a_500(client, curator):
    from resources.models import Resource

    make_resource("code/login", title="login", metadata={"lang": "py"})
    client.force_login(curator)
    url = "/admin/resources/resource/code/login/change/"
    response = client.post(url, {**_change_form_data(client.get(url)), "metadata": '{"a": "\\ud800"}'})

    assert response.status_code == 200 and "\\ud800" in response.content.decode()
    assert "a: " in " ".join(response.context["adminform"].form.errors["metadata"])
    assert Resource.objects.get(pk="code/login").metadata == {"lang": "py"}


def test_a_tokens_static_filter_holding_a_lone_surrogate_is_an_error_not_a_500(client, curator):
    from agents.models import AgentToken

    client.force_login(curator)
    response = client.post("/admin/agents/agenttoken/add/", {
        "agent_id": "a", "readable_scopes": "org:acme", "writable_scopes": "", "is_active": "on",
        "static_filters": '{"op": "EQ", "key": "tags.domain", "value": "\\ud800"}',
    })
    assert response.status_code == 200 and "\\ud800" in response.content.decode()
    assert "value: " in " ".join(response.context["adminform"].form.errors["static_filters"])
    assert not AgentToken.objects.exists()


# --- at scale: the admin's list and item pages read through indexes, and an item's history is not a form per row ---

def _statements_reading_every_item(captured) -> list[str]:
    """The captured statements over the items that PostgreSQL could only answer by reading every item (a sequential
    scan even with those turned off), known_scopes' own pass over the scopes aside (kept a minute per process)."""
    from django.db import connection

    found = []
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        for query in captured:
            sql = query["sql"]
            if "knowledge_knowledge" not in sql or not sql.startswith("SELECT") or "unnest(" in sql:
                continue
            cursor.execute("EXPLAIN " + sql)
            if "Seq Scan on knowledge_knowledge" in "\n".join(row[0] for row in cursor.fetchall()):
                found.append(sql)
    return found


@pytest.mark.parametrize("term, found", [
    ("selenium", {"Selenium login bypass"}),  # a word, any case
    ("logging", {"Selenium login bypass", "Tabs for logs"}),  # stemmed as the keyword search stems it
    ("制表符", {"用制表符缩进"}),  # Chinese, segmented
    ("agent:bob", {"Tabs for logs"}),  # an owner
    ("nothing-like-this", set()),
])
def test_the_admins_search_finds_words_owners_and_ids_through_indexes(client, curator, term, found):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    make_knowledge(task="Selenium login bypass", content="Log in with the test account")
    make_knowledge(task="Tabs for logs", content="Indent log files with tabs", owner="agent:bob")
    make_knowledge(task="用制表符缩进", content="代码用制表符缩进，宽度四")
    client.force_login(curator)
    with CaptureQueriesContext(connection) as captured:
        page = client.get("/admin/knowledge/knowledge/", {"q": term}).content.decode()
    tasks = {"Selenium login bypass", "Tabs for logs", "用制表符缩进"}
    assert {task for task in tasks if task in page} == found
    assert _statements_reading_every_item(captured.captured_queries) == []


def test_the_admins_search_finds_an_item_by_its_id_or_the_start_of_it(client, curator):
    item = make_knowledge(task="Rotate the keys")
    other = make_knowledge(task="Something else")
    client.force_login(curator)
    assert "Rotate the keys" in client.get("/admin/knowledge/knowledge/", {"q": item.id}).content.decode()
    by_day = client.get("/admin/knowledge/knowledge/", {"q": item.id[: len("knowledge-20260101")]}).content.decode()
    assert "Rotate the keys" in by_day and ("Something else" in by_day) == (other.id[:18] == item.id[:18])


def test_sorting_by_quality_orders_every_item_and_counts_them_all(client, curator):
    from knowledge.models import Knowledge

    for n, (score, helpful, harmful) in enumerate([(3, 0, 0), (5, 4, 0), (1, 0, 2), (4, 1, 1)]):
        make_knowledge(task=f"Item {n}", score=score, helpful=helpful, harmful=harmful)
    client.force_login(curator)
    qualities = sorted(item.quality_score for item in Knowledge.objects.all())
    for order in ("7", "-7"):  # the quality column, after the selection boxes
        page = client.get("/admin/knowledge/knowledge/", {"o": order})
        assert page.context["cl"].result_count == 4
        shown = [item.quality_score for item in page.context["cl"].result_list]
        assert shown == (qualities[::-1] if order.startswith("-") else qualities)


def test_the_list_reads_no_vector_keyword_document_or_content_and_counts_the_items_once(client, curator):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.factories import embed_saved

    for n in range(3):
        make_knowledge(task=f"Item {n}", content="x" * 5_000)
    embed_saved()
    client.force_login(curator)
    for query in ({}, {"status": "active"}, {"q": "item"}):
        with CaptureQueriesContext(connection) as captured:
            page = client.get("/admin/knowledge/knowledge/", query)
        assert page.status_code == 200 and "Item 2" in page.content.decode()
        items = [q["sql"] for q in captured.captured_queries if 'FROM "knowledge_knowledge"' in q["sql"]]
        rows = [sql for sql in items if sql.startswith('SELECT "knowledge_knowledge"."id"')]
        assert len(rows) == 1 and all(f'"knowledge_knowledge"."{column}"' not in rows[0].split(" FROM ")[0]
                                      for column in ("embedding", "search_document", "content")), rows
        assert sum("COUNT(" in sql for sql in items) == 1, items
    item = page.context["cl"].result_list[0]
    opened = client.get(f"/admin/knowledge/knowledge/{item.pk}/change/").content.decode()
    assert "x" * 5_000 in opened  # the item's own page shows its content


def test_an_item_with_many_reports_shows_the_newest_and_links_to_every_one(client, curator):
    from knowledge.admin import HISTORY_SHOWN
    from knowledge.models import FeedbackCase

    item = make_knowledge(task="Busy item")
    FeedbackCase.objects.bulk_create(FeedbackCase(knowledge=item, kind="helpful", case={"outcome": f"run {n}"},
                                                  reported_by="agent:x") for n in range(HISTORY_SHOWN + 30))
    client.force_login(curator)
    page = client.get(f"/admin/knowledge/knowledge/{item.pk}/change/").content.decode()
    assert f"{HISTORY_SHOWN + 30} in all" in page and f"/knowledge/{item.pk}/" in page
    assert page.count("run ") == HISTORY_SHOWN and f"run {HISTORY_SHOWN + 29}" in page  # the newest ones
    assert "feedback_cases-TOTAL_FORMS" not in page  # no form per report


def test_the_score_filter_lists_the_five_scores_and_filters_by_one(client, curator):
    make_knowledge(task="Scored two", score=2)
    make_knowledge(task="Scored five", score=5)
    client.force_login(curator)
    page = client.get("/admin/knowledge/knowledge/", {"score": "5"}).content.decode()
    assert "Scored five" in page and "Scored two" not in page
    assert all(f"?score={n}" in page for n in range(1, 6))
