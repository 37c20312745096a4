"""The Django admin under hostile edits, as the real roles: no 500, nothing written the API would refuse, audited.

- the resource-links inline on an item checks links as the API does (`services.check_new_item`): a resource
  that not every reader of the item may read is refused in the form, and a link change is audited;
- widening an item's scopes in the admin is refused while a linked resource is not readable in the new ones;
- fields the services never change (`id`, `secure_resource_id`, `superseded_by`, a resource's `id`) are read-only;
- a changelist filter the database refuses is Django's "invalid lookup" (a redirect to ?e=1), not a 500;
- the `admin` role opens Resource versions (curation migration 0002), viewers and curators do not.
"""
import pytest

from tests.callers import agent_client, person_in
from tests.factories import make_knowledge, make_resource

pytestmark = pytest.mark.django_db

ITEM_CHANGE = "/admin/knowledge/knowledge/{}/change/"
RESOURCE_CHANGE = "/admin/resources/resource/{}/change/"


def staff_in(django_user_model, role, username):
    return person_in(django_user_model, role, username, is_staff=True)


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser(username="root", email="", password="pw-for-tests")


def change_form_data(response) -> dict:
    """What the change form would POST back unchanged: its fields and every inline's rows and management form."""
    form = response.context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        for key, value in formset.management_form.initial.items():
            data[f"{formset.prefix}-{key}"] = value
        for index, inline_form in enumerate(formset.initial_forms):
            for name in inline_form.fields:
                value = inline_form[name].value()
                if value is not None and name != "DELETE":
                    data[f"{formset.prefix}-{index}-{name}"] = value
    return data


def add_link(data: dict, item, resource_id: str, position: int = 0) -> dict:
    index = int(data["resource_links-TOTAL_FORMS"])
    return {**data, "resource_links-TOTAL_FORMS": index + 1, f"resource_links-{index}-resource": resource_id,
            f"resource_links-{index}-position": position, f"resource_links-{index}-knowledge": item.pk}


def audit_operations():
    from agents.models import AuditEvent

    return list(AuditEvent.objects.order_by("at", "id").values_list("operation", "target", "args"))


# --- 1. the resource-links inline: the API's check, and an audit row -------------------------------------------


def test_the_links_inline_refuses_a_resource_the_items_readers_may_not_read(client, superuser):
    from knowledge.models import KnowledgeResource

    make_resource("cred/b/api", scopes=["team:b"], content_type="credential", secure_body="b-secret")
    item = make_knowledge(task="inline target", scopes=["team:a"], embed=False)
    client.force_login(superuser)
    url = ITEM_CHANGE.format(item.pk)

    response = client.post(url, add_link(change_form_data(client.get(url)), item, "cred/b/api"))

    assert response.status_code == 200  # the form again, with the service's reason
    page = response.content.decode()
    assert "cred/b/api" in page and "not readable in every scope of this item" in page
    assert not KnowledgeResource.objects.exists() and audit_operations() == []
    seen = agent_client("a_agent", scopes=("team:a",)).get(f"/api/knowledge/{item.pk}").json()
    assert seen["resource_ids"] == []


def test_the_links_inline_refuses_an_unknown_resource_id_without_a_500(client, superuser):
    from knowledge.models import KnowledgeResource

    item = make_knowledge(task="inline target", scopes=["team:a"], embed=False)
    client.force_login(superuser)
    url = ITEM_CHANGE.format(item.pk)
    response = client.post(url, add_link(change_form_data(client.get(url)), item, "no/such/resource"))
    assert response.status_code == 200 and not KnowledgeResource.objects.exists() and audit_operations() == []


def test_a_link_the_api_would_accept_is_saved_and_audited_and_so_is_its_removal(client, superuser):
    from knowledge.models import KnowledgeResource

    make_resource("code/shared", scopes=["team:a", "team:b"])
    item = make_knowledge(task="inline target", scopes=["team:a"], embed=False)
    client.force_login(superuser)
    url = ITEM_CHANGE.format(item.pk)

    added = client.post(url, add_link(change_form_data(client.get(url)), item, "code/shared"))

    assert added.status_code == 302
    assert list(KnowledgeResource.objects.values_list("knowledge_id", "resource_id")) == [(item.pk, "code/shared")]
    assert audit_operations() == [("admin_knowledge_change", item.pk,
                                   {"resource_ids": ["code/shared"], "previous_resource_ids": []})]

    data = {**change_form_data(client.get(url)), "resource_links-0-DELETE": "on"}
    removed = client.post(url, data)

    assert removed.status_code == 302 and not KnowledgeResource.objects.exists()
    assert audit_operations()[-1] == ("admin_knowledge_change", item.pk,
                                      {"resource_ids": [], "previous_resource_ids": ["code/shared"]})


def test_widening_an_items_scopes_past_its_linked_resources_is_refused(client, django_user_model):
    from knowledge.models import Knowledge

    make_resource("cred/b/api", scopes=["team:b"], content_type="credential", secure_body="b-secret")
    item = make_knowledge(task="scoped target", scopes=["team:b"], resource_ids=["cred/b/api"], embed=False)
    client.force_login(staff_in(django_user_model, "curator", "carl"))
    url = ITEM_CHANGE.format(item.pk)
    data = change_form_data(client.get(url))

    widened = client.post(url, {**data, "scopes": "team:a,team:b"})

    assert widened.status_code == 200 and "not readable in every scope of this item" in widened.content.decode()
    assert Knowledge.objects.get(pk=item.pk).scopes == ["team:b"] and audit_operations() == []
    assert agent_client("a_agent", scopes=("team:a",)).get(f"/api/knowledge/{item.pk}").status_code == 404

    narrowed_owner = client.post(url, {**data, "owner": "agent:b_owner"})  # other changes still save
    assert narrowed_owner.status_code == 302 and Knowledge.objects.get(pk=item.pk).owner == "agent:b_owner"


# --- 2. fields the services refuse to change are read-only ---------------------------------------------------------


def test_the_item_form_offers_only_fields_the_service_changes(client, django_user_model):
    from knowledge import services

    item = make_knowledge(task="admin target", scopes=["team:a"], embed=False)
    client.force_login(staff_in(django_user_model, "curator", "carl"))
    form = client.get(ITEM_CHANGE.format(item.pk)).context["adminform"].form
    assert set(form.fields) <= {*services.TEXT_FIELDS, *services.PLAIN_FIELDS}
    assert not {"id", "secure_resource_id", "superseded_by"} & set(form.fields)


@pytest.mark.parametrize("field, value", [
    ("id", "knowledge-20260101-zzzz"),
    ("secure_resource_id", "cred/b/api"),
    ("superseded_by", "{other}"),
])
def test_a_curator_posting_a_field_the_service_refuses_changes_nothing(client, django_user_model, field, value):
    from knowledge.models import Knowledge

    make_resource("cred/b/api", scopes=["team:b"], content_type="credential", secure_body="b-secret")
    other = make_knowledge(task="the successor", scopes=["team:a"], embed=False)
    item = make_knowledge(task="admin target", scopes=["team:a"], embed=False)
    client.force_login(staff_in(django_user_model, "curator", "carl"))
    url = ITEM_CHANGE.format(item.pk)
    before = Knowledge.objects.values().get(pk=item.pk)

    response = client.post(url, {**change_form_data(client.get(url)), field: value.format(other=other.pk)})

    assert response.status_code == 302  # saved: nothing changed, so nothing to do
    assert Knowledge.objects.values().get(pk=item.pk) == before
    assert not Knowledge.objects.filter(pk="knowledge-20260101-zzzz").exists() and audit_operations() == []


def test_a_resources_id_is_read_only_once_it_exists(client, superuser):
    from resources import services
    from resources.models import Resource

    make_resource("code/login", title="old title", scopes=["team:a"])
    client.force_login(superuser)
    url = RESOURCE_CHANGE.format("code/login")
    page = client.get(url)
    assert set(page.context["adminform"].form.fields) <= {*services.CONTENT_FIELDS, *services.PLAIN_FIELDS}

    response = client.post(url, {**change_form_data(page), "id": "code/renamed", "title": "new title"})

    assert response.status_code == 302
    assert list(Resource.objects.values_list("id", "title")) == [("code/login", "new title")]
    assert [op for op, _, _ in audit_operations()] == ["admin_resource_change"]
    add_form = client.get("/admin/resources/resource/add/").context["adminform"].form
    assert "id" in add_form.fields  # a new resource still gets its id here


# --- 3. changelist filters the database refuses --------------------------------------------------------------------


@pytest.mark.parametrize("role, path", [
    ("curator", "/admin/knowledge/knowledge/?scopes__contains=x"),
    ("curator", "/admin/knowledge/knowledge/?created_at__year=99999"),
    ("curator", "/admin/knowledge/knowledge/?types__overlap=x"),
    ("curator", "/admin/knowledge/knowledge/?id__regex=("),
    ("viewer", "/admin/knowledge/knowledgeversion/?created_at__year=99999"),
    ("viewer", "/admin/knowledge/knowledgeversion/?task__regex=("),
    ("viewer", "/admin/resources/resource/?scopes__contains=x"),
    ("viewer", "/admin/resources/resource/?created_at__year=99999"),
    ("viewer", "/admin/resources/resource/?expires_at__year=99999"),
    ("admin", "/admin/resources/resourceversion/?created_at__year=99999"),
    ("admin", "/admin/resources/revealevent/?at__year=99999"),
    ("admin", "/admin/resources/revealevent/?resource_id__regex=("),
])
def test_a_filter_the_database_refuses_is_an_invalid_lookup_not_a_500(client, django_user_model, role, path):
    make_knowledge(task="listed", scopes=["team:a"], embed=False).versions.create(
        number=1, task="t", content="c", changed_by="user:x")
    make_resource("code/listed", scopes=["team:a"]).versions.create(number=1, title="t", content_type="code",
                                                                    replaced_by="user:x")
    client.force_login(staff_in(django_user_model, role, "someone"))

    response = client.get(path)

    assert response.status_code == 302 and response["Location"].endswith("?e=1"), response.status_code
    assert client.get(response["Location"]).status_code == 200  # the list again, unfiltered


@pytest.mark.parametrize("path", [
    "/admin/agents/auditevent/?at__year=99999", "/admin/agents/auditevent/?operation__regex=(",
    "/admin/agents/agenttoken/?readable_scopes__contains=x", "/admin/jobs/workerheartbeat/?last_seen__year=99999",
    "/admin/auth/user/?date_joined__year=99999", "/admin/auth/group/?name__regex=(",
])
def test_every_other_admin_answers_a_refused_filter_as_an_invalid_lookup(client, superuser, path):
    """Admins not built on RefusesBadLookups (the agents', the jobs', Django's own users and groups) get its
    changelist when the project starts (`core.admin_tools.refuse_bad_lookups_everywhere`)."""
    client.force_login(superuser)

    response = client.get(path)

    assert response.status_code == 302 and response["Location"].endswith("?e=1"), response.status_code


@pytest.mark.parametrize("path", ["/admin/resources/resource/?secure_body__length__gt=40",
                                  "/admin/resources/resourceversion/?secure_body__isnull=False"])
def test_no_filter_reads_a_secrets_ciphertext(client, django_user_model, path):
    make_resource("cred/site", scopes=["team:a"], content_type="credential", secure_body="pw-" + "x" * 60).versions.create(
        number=1, title="old", content_type="credential", replaced_by="user:x", secure_body="pw-1")
    client.force_login(staff_in(django_user_model, "admin", "ada"))
    assert client.get(path).status_code == 400  # Django's refusal of a lookup the admin does not allow


def test_the_list_filters_still_filter(client, django_user_model):
    make_knowledge(task="in team a", scopes=["team:a"], embed=False)
    make_knowledge(task="in team b", scopes=["team:b"], embed=False)
    client.force_login(staff_in(django_user_model, "viewer", "vera"))
    listing = client.get("/admin/knowledge/knowledge/?scope=team:a")
    assert listing.status_code == 200
    page = listing.content.decode()
    assert "in team a" in page and "in team b" not in page
    from django.utils import timezone

    assert client.get(f"/admin/knowledge/knowledge/?created_at__year={timezone.now().year}").status_code == 200


# --- 4. the admin role opens Resource versions ---------------------------------------------------------------------


@pytest.mark.parametrize("role, status", [("admin", 200), ("curator", 403), ("viewer", 403)])
def test_resource_versions_open_for_the_admin_role_only(client, django_user_model, role, status):
    resource = make_resource("cred/site", scopes=["team:a"], content_type="credential", secure_body="pw-2")
    version = resource.versions.create(number=1, title="old", content_type="credential", replaced_by="user:x",
                                       secure_body="pw-1")
    client.force_login(staff_in(django_user_model, role, "someone"))

    listing = client.get("/admin/resources/resourceversion/")
    change = client.get(f"/admin/resources/resourceversion/{version.pk}/change/")

    assert (listing.status_code, change.status_code) == (status, status)
    for response in (listing, change):
        assert "pw-1" not in response.content.decode() and "pw-2" not in response.content.decode()
    if status == 200:
        assert "reveal…" in listing.content.decode()  # README: "Resource versions → reveal…"
        assert client.post(f"/admin/resources/resourceversion/{version.pk}/change/", {"title": "x"}).status_code == 403
