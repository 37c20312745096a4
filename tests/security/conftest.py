"""Role users and API clients for the security tests (the role groups come from the migration)."""

import pytest
from rest_framework.test import APIClient

from tests.callers import acting, agent_client, agent_key, ensure_roles, person_in, session_client  # noqa: F401 - shared names
from tests.curation.conftest import admin_client_, admin_user, roles, viewer, viewer_client  # noqa: F401 - autouse roles

ROLE_USERS = {"viewer": "vera", "curator": "carl", "admin": "ada"}


def make_user(django_user_model, username: str, role: str | None = None, **extra):
    """A staff user (so the admin's own permission checks are what is tested) in `role`, or in no group."""
    return person_in(django_user_model, role, username, is_staff=True, **extra)


def token_client(agent_id: str, scopes=("org:acme",), **kwargs) -> APIClient:
    return agent_client(agent_id, scopes, **kwargs)


@pytest.fixture
def api_as(roles, django_user_model):
    """api_as("viewer"), api_as("curator"), api_as("admin"), api_as(None) (no role), api_as("superuser")."""

    def make(role):
        if role == "superuser":
            return session_client(django_user_model.objects.create_superuser(username="root", password="pw"))
        return session_client(make_user(django_user_model, ROLE_USERS.get(role, "nora"), role))

    return make


# --- one committed world for the authorization matrix (tests/security/test_authz_matrix.py) ---

MARKERS = {"org:acme": "MARKER-ACME-7f3a", "org:other": "MARKER-OTHER-9c2e"}
SECRETS = {"org:acme": "SECRET-ACME-51d0", "org:other": "SECRET-OTHER-0b7c"}
AGENTS = {  # caller -> (agent id, readable scopes, token options)
    "owner": ("owner_agent", ["org:acme"], {"can_read_secrets": True}),
    "other": ("other_agent", ["org:other"], {"can_read_secrets": True}),
    "reader": ("reader_agent", ["org:acme"], {"writable_scopes": []}),
    "nosecrets": ("plain_agent", ["org:acme"], {}),
}
SESSIONS = {"viewer": "viewer", "curator": "curator", "admin": "admin", "norole": None}


def _seed_org(scope: str, owner: str):
    from ingest.models import Document
    from jobs.models import Job
    from knowledge import services
    from tests.factories import make_knowledge, make_resource
    from webhooks.models import Delivery, Subscription

    item = make_knowledge(task="Deploy to the staging site", content=f"first draft {MARKERS[scope]}",
                          scopes=[scope], owner=owner, tags={"marker": MARKERS[scope]})
    services.knowledge_edit(acting(owner), knowledge_id=item.id, reason="seed",
                            content=f"Run the deploy script {MARKERS[scope]}")
    name = scope.split(":")[1]
    make_resource(f"credentials/{name}-site", scopes=[scope], body=MARKERS[scope], secure_body=SECRETS[scope],
                  content_type="credential")
    job = Job.objects.create(kind="evolve", subject=item.id, requested_by=owner, status="failed", error=MARKERS[scope])
    document = Document.objects.create(origin="upload", uri=f"{name}-{MARKERS[scope]}.md", kind="markdown", scopes=[scope],
                                       types=["tool"], chunk_size=1200, chunk_overlap=150, requested_by=owner,
                                       title=MARKERS[scope], status="done")
    from knowledge.models import Conflict

    rival = make_knowledge(task="Deploy to the staging site by hand", content="Never run the deploy script",
                           scopes=[scope], owner=owner)
    first, second = sorted([item.id, rival.id])
    conflict = Conflict.objects.create(first_id=first, second_id=second, kind="contradiction", detected_for=rival.id,
                                       explanation=f"opposite advice {MARKERS[scope]}")
    hook = Subscription.objects.create(url=f"https://8.8.8.8/hooks/{name}", event_types=["knowledge.created"],
                                       scopes=[scope], created_by="user:curator-user")
    delivery = Delivery.objects.create(subscription=hook, event_id=f"msg_seed_{name}", event_type="knowledge.created",
                                       payload={"type": "knowledge.created", "data": {}}, status="failed", attempts=1,
                                       response_status=500)
    return {"item": item.id, "job": str(job.id), "resource": f"credentials/{name}-site", "document": str(document.id),
            "conflict": str(conflict.id), "webhook": str(hook.id), "delivery": str(delivery.id)}


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """Two orgs' data, the agent tokens and the logged-in users, committed once for a whole module
    (so a server in another process sees them too); flushed afterwards, as a transactional test is."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    with django_db_blocker.unblock():
        ensure_roles()
        acme, other = _seed_org("org:acme", "agent:owner_agent"), _seed_org("org:other", "agent:other_agent")
        tokens = {}
        for caller, (agent_id, scopes, options) in AGENTS.items():
            tokens[caller] = agent_key(agent_id, scopes, **options)
        clients = {caller: Client(HTTP_AUTHORIZATION=f"Bearer {key}") for caller, key in tokens.items()}
        for caller, role in SESSIONS.items():
            clients[caller] = Client()
            clients[caller].force_login(make_user(get_user_model(), f"{caller}-user", role))
        clients["anon"] = Client()
        yield {"acme": acme, "other": other, "tokens": tokens, "clients": clients}
        call_command("flush", interactive=False, verbosity=0)


@pytest.fixture(scope="module")
def asgi_url(world, django_db_blocker):
    """The web process's ASGI application (Django + /mcp) under uvicorn, on the test database."""
    import os

    from tests.conftest import database_url_for_subprocess
    from tests.stack import asgi_server

    with django_db_blocker.unblock():
        env = {**os.environ, "DATABASE_URL": database_url_for_subprocess(),
               "DJANGO_SETTINGS_MODULE": "knowhub_site.test_settings"}
    with asgi_server(env) as url:
        yield url
