"""Resource services take the caller: a reveal is refused, unrecorded, to a caller without secret access."""
import pytest
from rest_framework.exceptions import PermissionDenied

from agents.caller import Caller
from resources.models import RevealEvent
from resources.services import resource_create, resource_reveal, resource_save_version
from tests.callers import acting
from tests.factories import make_resource

pytestmark = pytest.mark.django_db


def test_a_reveal_by_a_caller_without_secret_access_is_refused_and_leaves_no_reveal_event():
    resource = make_resource("credentials/site", secure_body="s3cret")
    for caller in (acting("agent:reader"), Caller.system("job:evolve:1")):
        with pytest.raises(PermissionDenied, match="may not read secrets"):
            resource_reveal(caller, resource=resource, remote_addr=None)
    assert not RevealEvent.objects.exists()


def test_a_reveal_by_a_caller_with_secret_access_is_recorded_under_its_name():
    resource = make_resource("credentials/site", secure_body="s3cret")
    assert resource_reveal(acting("agent:ops", can_read_secrets=True), resource=resource, remote_addr="10.0.0.1") == "s3cret"
    assert list(RevealEvent.objects.values_list("principal", "resource_id")) == [("agent:ops", "credentials/site")]


def test_a_resource_is_owned_by_its_creator_and_a_new_version_names_who_replaced_it():
    writer = Caller(principal="agent:w", agent_id="w", readable_scopes=("team:a",), writable_scopes=("team:a",))
    created = resource_create(writer, resource_id="code/x", title="x", scopes=["team:a"], body="v1")
    resource_save_version(acting("agent:other"), resource_id="code/x", title="x", body="v2")
    assert created.owner == "agent:w"
    assert created.versions.get().replaced_by == "agent:other"
    with pytest.raises(PermissionDenied, match="team:b"):
        resource_create(writer, resource_id="code/y", title="y", scopes=["team:b"])
