"""Every kind of caller the tests need, made one way: agent tokens, their API clients, people in roles.

Plain functions (import them anywhere); the fixtures built on them (`owner`, `peer`, `outsider`,
`curator_token`, `person`) are in tests/conftest.py.
"""
import dataclasses
import importlib

from django.apps import apps
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from agents.caller import Caller
from agents.services import agent_token_create

PASSWORD = "pw-for-tests"


def acting(principal: str = "agent:research_agent", **rights) -> Caller:
    """A caller for calling services directly: writes anywhere, recorded as `principal` (rights as Caller takes them)."""
    return dataclasses.replace(Caller.system(principal), **rights)


def agent_key(agent_id: str = "research_agent", scopes=("org:acme",), **token_options) -> str:
    """A new token's raw key; `token_options` as agent_token_create takes them (writable_scopes, can_curate, ...)."""
    return agent_token_create(agent_id=agent_id, readable_scopes=list(scopes), **token_options)[1]


def client_with(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def agent_client(agent_id: str = "research_agent", scopes=("org:acme",), **token_options) -> APIClient:
    return client_with(agent_key(agent_id, scopes, **token_options))


def ensure_roles() -> None:
    """The role groups as curation's migrations leave them; a transactional test before this one may have flushed
    the migrations' rows."""
    if not Group.objects.filter(name="viewer").exists():
        importlib.import_module("curation.migrations.0001_roles").create_roles(apps, None)
        importlib.import_module("curation.migrations.0002_admin_views_resource_versions").grant(apps, None)


def person_in(django_user_model, role: str | None, username: str, **extra):
    """A user in `role` (viewer, curator, admin), or in no group for None."""
    ensure_roles()
    user = django_user_model.objects.create_user(username=username, password=PASSWORD, **extra)
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


def session_client(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client
