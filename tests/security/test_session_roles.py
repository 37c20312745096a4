"""Browser sessions on the REST API get exactly their role's rights, the same the curation UI grants."""
import pytest
from rest_framework.test import APIClient

from agents.caller import Caller
from agents.models import AuditEvent
try:
    from curation.permissions import rights_of
except ImportError:
    rights_of = None
from knowledge.models import Knowledge
from resources.models import Resource, RevealEvent
from tests.factories import make_knowledge, make_resource
from tests.security.conftest import make_user, token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def items(roles):
    acme = make_knowledge(scopes=["org:acme"], owner="agent:owner_agent", embed=False)
    other = make_knowledge(scopes=["org:other"], owner="agent:other_agent", embed=False)
    make_resource("credentials/other-site", scopes=["org:other"], secure_body="hunter2")
    return acme, other


def writes(item: Knowledge) -> list[tuple[str, str, dict]]:
    """Every kind of API write a browser could send, aimed at `item` (in org:acme) or at org:other."""
    return [
        ("put", f"/api/knowledge/{item.id}", {"add_helpful_case": {"note": "worked"}}),
        ("put", f"/api/knowledge/{item.id}", {"add_harmful_case": {"note": "broke"}}),
        ("put", f"/api/knowledge/{item.id}", {"update_score": 5}),
        ("patch", f"/api/knowledge/{item.id}", {"content": "rewritten", "reason": "mine now"}),
        ("post", "/api/knowledge", {"task": "t", "content": "c", "types": ["tool"], "scopes": ["org:other"]}),
        ("post", "/api/knowledge/batch_update", {"feedback_list": [{"knowledge_id": item.id, "is_helpful": True}]}),
        ("post", "/api/knowledge/slim", {"dry_run": True}),
        ("post", "/api/resource", {"id": "code/new", "title": "new", "scopes": ["org:other"]}),
        ("post", "/api/resource", {"id": "credentials/other-site", "title": "replaced"}),
    ]


def send(client: APIClient, method: str, url: str, body: dict):
    return getattr(client, method)(url, body, format="json")


def test_viewer_reads_every_scope_through_the_api(api_as, items):
    viewer = api_as("viewer")
    for item in items:
        assert viewer.get(f"/api/knowledge/{item.id}").status_code == 200
    listed = viewer.get("/api/knowledge").json()
    assert {r["id"] for r in listed["results"]} == {i.id for i in items}
    resource = viewer.get("/api/resource/credentials/other-site")
    assert resource.status_code == 200 and "hunter2" not in resource.content.decode()


def test_viewer_cannot_write_anything_through_the_api_feedback_included(api_as, items):
    viewer = api_as("viewer")
    for method, url, body in writes(items[0]):
        response = send(viewer, method, url, body)
        assert response.status_code == 403, (method, url, body, response.content)
        assert response.json()["error"]["code"] == "permission_denied"
    acme = Knowledge.objects.get(pk=items[0].id)
    assert (acme.helpful, acme.harmful, acme.score, acme.content, acme.versions.count()) == (
        0, 0, 3, items[0].content, 0)
    assert Knowledge.objects.count() == 2 and Resource.objects.get().title == "credentials/other-site"
    assert not AuditEvent.objects.exists()


def test_viewer_cannot_reveal_a_secret(api_as, items):
    response = api_as("viewer").get("/api/resource/credentials/other-site", {"reveal": "true"})
    assert response.status_code == 403 and "hunter2" not in response.content.decode()
    assert not RevealEvent.objects.exists()


def test_curator_writes_every_scope_and_edits_items_it_does_not_own(api_as, items):
    curator = api_as("curator")
    statuses = [send(curator, method, url, body).status_code for method, url, body in writes(items[0])]
    assert statuses == [200, 200, 200, 200, 201, 200, 409, 201, 201]  # slim: 409, no LLM in tests
    acme = Knowledge.objects.get(pk=items[0].id)
    assert (acme.helpful, acme.harmful, acme.score, acme.content) == (2, 1, 5, "rewritten")
    assert acme.versions.get().changed_by == "user:carl"
    assert Knowledge.objects.get(scopes=["org:other"], owner="user:carl").source["agent_id"] == "carl"
    assert Resource.objects.get(pk="credentials/other-site").title == "replaced"


def test_curator_cannot_reveal_a_secret(api_as, items):
    response = api_as("curator").get("/api/resource/credentials/other-site", {"reveal": "true"})
    assert response.status_code == 403 and not RevealEvent.objects.exists()


@pytest.mark.parametrize(("role", "principal"), [("admin", "user:ada"), ("superuser", "user:root")])
def test_admin_and_superuser_reveal_secrets_and_each_reveal_is_audited(api_as, items, role, principal):
    response = api_as(role).get("/api/resource/credentials/other-site", {"reveal": "true"})
    assert response.status_code == 200 and response.json()["secure_body"] == "hunter2"
    assert RevealEvent.objects.get().principal == principal


@pytest.mark.parametrize(("method", "url", "body"), [
    ("get", "/api/knowledge", {}),
    ("get", "/api/knowledge/search", {"q": "staging"}),
    ("get", "/api/knowledge/filters", {}),
    ("get", "/api/resource/credentials/other-site", {}),
    ("get", "/api/jobs/00000000-0000-0000-0000-000000000000", {}),
    ("post", "/api/knowledge", {"task": "t", "content": "c", "types": ["tool"], "scopes": ["org:acme"]}),
])
def test_a_user_without_a_role_gets_403_everywhere_in_the_api(api_as, items, method, url, body):
    response = getattr(api_as(None), method)(url, body, **({"format": "json"} if method == "post" else {}))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied" and "no role" in response.json()["error"]["message"]
    assert Knowledge.objects.count() == 2


def test_an_inactive_admin_gets_no_rights(roles, django_user_model):
    ada = make_user(django_user_model, "ada", "admin", is_active=False)
    assert Caller.for_user(ada) == Caller(principal="user:ada", agent_id="ada", readable_scopes=(),
                                          writable_scopes=(), read_only=True, has_role=False)


@pytest.mark.parametrize("role", ["viewer", "curator", "admin", None])
def test_the_api_caller_follows_the_same_permissions_as_the_ui(roles, django_user_model, role):
    user = make_user(django_user_model, f"u-{role}", role)
    caller, rights = Caller.for_user(user), rights_of(user)
    assert rights.view == (role is not None) == caller.has_role
    assert (caller.readable_scopes is None) == user.has_perm("knowledge.view_knowledge")
    assert (caller.writable_scopes is None) == (not caller.read_only) == user.has_perm("knowledge.change_knowledge")
    assert caller.can_read_secrets == user.has_perm("resources.reveal_resource")


def test_a_session_write_without_the_csrf_token_is_refused(roles, django_user_model, items):
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(make_user(django_user_model, "carl", "curator"))
    response = browser.put(f"/api/knowledge/{items[0].id}", {"update_score": 5}, format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["error"]["message"]
    assert Knowledge.objects.get(pk=items[0].id).score == 3


def test_an_owner_token_without_write_access_to_the_items_scopes_cannot_edit_it(roles, items):
    reader = token_client("owner_agent", writable_scopes=[])
    response = reader.patch(f"/api/knowledge/{items[0].id}", {"content": "x", "reason": "r"}, format="json")
    assert response.status_code == 403
    writer = token_client("owner_agent")
    assert writer.patch(f"/api/knowledge/{items[0].id}", {"content": "x", "reason": "r"}, format="json").status_code == 200
