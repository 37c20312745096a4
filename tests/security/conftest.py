"""Role users and API clients for the security tests (the role groups come from the migration)."""
import importlib

import pytest
from django.apps import apps
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from agents.services import agent_token_create

ROLE_USERS = {"viewer": "vera", "curator": "carl", "admin": "ada"}


def ensure_roles() -> None:
    """The role groups; a transactional test before this one may have flushed the migration's rows."""
    if not Group.objects.filter(name="viewer").exists():
        importlib.import_module("curation.migrations.0001_roles").create_roles(apps, None)


def make_user(django_user_model, username: str, role: str | None = None, **extra):
    """A staff user (so the admin's own permission checks are what is tested) in `role`, or in no group."""
    user = django_user_model.objects.create_user(username=username, password="pw-for-tests", is_staff=True, **extra)
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


def session_client(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def token_client(agent_id: str, scopes=("org:acme",), **kwargs) -> APIClient:
    _, key = agent_token_create(agent_id=agent_id, readable_scopes=list(scopes), **kwargs)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def roles(db):
    ensure_roles()


@pytest.fixture
def api_as(roles, django_user_model):
    """api_as("viewer"), api_as("curator"), api_as("admin"), api_as(None) (no role), api_as("superuser")."""

    def make(role):
        if role == "superuser":
            return session_client(django_user_model.objects.create_superuser(username="root", password="pw"))
        return session_client(make_user(django_user_model, ROLE_USERS.get(role, "nora"), role))

    return make
