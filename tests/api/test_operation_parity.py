"""The operation registry (agents.operations): every operation served alike, and always through the chain."""
import re
from pathlib import Path

import anyio
import pytest
from knowhub_client import AsyncKnowHub, KnowHub
from knowhub_client.tools import TOOL_NAMES
from rest_framework.test import APIClient

from agents import operations
from agents.chain import Continue, Error, Filter, registered_temporarily
from api.mcp_server import _op, _Refused, _run_sync, server
from agents.models import AuditEvent
from jobs.models import Job
from resources.models import RevealEvent
from tests.api.conftest import client_with, token
from tests.callers import person_in, session_client
from tests.factories import make_knowledge, make_resource

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()

# Operations deliberately not offered as OpenAI tools, with the reason (the parity test holds this list to account).
NOT_AN_OPENAI_TOOL = {
    "knowledge_filters": "the filter keys go into the agent's instructions (KnowHub.build_context), not a tool call",
    "knowledge_bulk_save": "many items come from an importer or the agent's own code, not from one model turn",
    "knowledge_export": "a backup or a move is the code around the model's job (KnowHub.knowledge_export)",
    "knowledge_import": "a curator's operation on files, not offered to a working agent's model",
    "document_ingest": "documents come from files and URLs the agent's code holds, not from one model turn",
    "document_list": "the agent's code follows its documents (KnowHub.document_list), not the model",
    "document_get": "a document is waited for by the code around the model (KnowHub.wait_for_job), not polled by it",
    "job_get": "a job is waited for by the code around the model (KnowHub.wait_for_job), not polled by the model",
    **{name: "a curator's operation: reviewed by a person or a curator agent's own code, not offered to a working "
             "agent's model" for name in ("knowledge_versions", "knowledge_restore_version", "knowledge_archive",
                                          "knowledge_activate", "knowledge_unmerge", "merge_proposals",
                                          "merge_approve", "merge_reject", "evolve_rollback", "evolve_accept",
                                          "evolve_reject", "knowledge_supersede", "conflict_list", "conflict_get",
                                          "conflict_resolve", "conflict_reopen")},
    **{name: "webhooks are set up by a person or a curator agent's own code, not by a working agent's model"
       for name in ("webhook_subscribe", "webhook_list", "webhook_get", "webhook_change", "webhook_delete",
                    "webhook_resend")},
}


def _rest_operations() -> dict[str, set[tuple[str, str]]]:
    """Operation name → the (METHOD, path) pairs that serve it, read from the OpenAPI schema."""
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    served: dict[str, set[tuple[str, str]]] = {}
    for path, methods in schema["paths"].items():
        for method, spec in methods.items():
            name = spec.get("x-knowhub-operation")
            assert name, f"{method.upper()} {path} serves no registered operation"
            served.setdefault(name, set()).add((method.upper(), re.sub(r"\{\w+\}", "{id}", path)))
    return served


@pytest.mark.django_db
def test_every_registered_operation_is_served_by_rest_mcp_both_clients_and_the_openai_tools():
    registry = set(operations.registered())
    assert set(_rest_operations()) == registry
    assert {tool.name for tool in anyio.run(server.list_tools)} == registry
    for name in registry:
        assert callable(getattr(KnowHub, name, None)), f"the sync client lacks {name}"
        assert callable(getattr(AsyncKnowHub, name, None)), f"the async client lacks {name}"
    assert set(TOOL_NAMES) | set(NOT_AN_OPENAI_TOOL) == registry and not set(TOOL_NAMES) & set(NOT_AN_OPENAI_TOOL)


@pytest.mark.django_db
def test_the_readme_endpoint_table_documents_every_operation_and_nothing_else():
    documented = set(re.findall(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/api/[^`?\[ ]*)", README, flags=re.M))
    documented = {(method, re.sub(r"\{\w+\}", "{id}", path)) for method, path in documented}
    served = _rest_operations()
    for name, routes in served.items():
        assert routes & documented, f"README's endpoint table lacks {name} ({sorted(routes)})"
    every_route = set().union(*served.values()) | {("GET", "/api/schema/")}  # the schema itself
    stale = documented - every_route
    assert not stale, f"README documents routes that serve no operation: {sorted(stale)}"


# Operations whose handler already returns the JSON it sends, with the reason (all others have an output serializer).
RENDERED_BY_THE_HANDLER = {
    "knowledge_update": "the item in the seed's shape with its newest cases only (serializers.feedback_reply, documented "
                        "by outputs.FeedbackOutput) plus `job` when an evolve was queued",
    "knowledge_export": "a stream of JSON Lines records (ingest.export), too large to render as one reply",
}


def test_every_reply_is_rendered_by_a_declared_output_serializer():
    without = {name for name, op in operations.registered().items() if op.output is None}
    assert without == set(RENDERED_BY_THE_HANDLER)


def test_a_write_must_declare_a_write_permission():
    with pytest.raises(ValueError, match="writes"):
        operations.Operation(name="x", handler=lambda caller: None, summary="", writes=True, permission="read")


@pytest.mark.django_db(transaction=True)  # _run_sync closes connections as a request's end would
def test_reads_run_through_the_filter_chain_so_a_deployment_filter_can_refuse_a_secret_reveal():
    key = token(can_read_secrets=True)
    agent = client_with(key)
    item = make_knowledge(tags={"domain": "web"})
    make_resource("credentials/site_a", secure_body="pw-123", scopes=["org:acme"])
    job = Job.objects.create(kind="evolve", subject=item.id, requested_by="agent:fuzz_agent")
    seen = []

    def no_reveal(ctx):
        seen.append(ctx["operation"])
        if ctx["operation"] == "resource_get" and ctx["args"]["reveal"]:  # validated by then
            return Error("secrets are not revealed in this deployment", status=403, code="forbidden")
        return Continue(ctx)

    with registered_temporarily(Filter("no_reveal", "pre_invocation", no_reveal)):
        assert agent.get(f"/api/knowledge/{item.id}").status_code == 200
        assert agent.get("/api/knowledge/filters").status_code == 200
        assert agent.get(f"/api/jobs/{job.id}").status_code == 200
        assert agent.get("/api/resource/credentials/site_a").status_code == 200
        refused = agent.get("/api/resource/credentials/site_a?reveal=true")
        with pytest.raises(_Refused) as over_mcp:
            _run_sync(key, _op("resource_get", {"reveal": True}, resource_id="credentials/site_a"))
    assert refused.status_code == 403 and "not revealed" in refused.json()["error"]["message"]
    assert over_mcp.value.error["status"] == 403
    assert not RevealEvent.objects.exists()  # the secret was never decrypted
    assert {"knowledge_get", "knowledge_filters", "job_get", "resource_get"} <= set(seen)
    assert agent.get("/api/resource/credentials/site_a?reveal=true").json()["secure_body"] == "pw-123"  # filter gone


@pytest.mark.django_db
def test_the_declared_permission_is_enforced_for_each_caller_kind(django_user_model):
    item = make_knowledge()
    reader = client_with(token(agent_id="reader", writable_scopes=[]))
    viewer = session_client(person_in(django_user_model, "viewer", "vera"))

    feedback = {"add_helpful_case": {"outcome": "ok"}}
    assert reader.put(f"/api/knowledge/{item.id}", feedback, format="json").status_code == 200  # any token may report
    refused = viewer.put(f"/api/knowledge/{item.id}", feedback, format="json")
    assert refused.status_code == 403 and "knowledge_update" in refused.json()["error"]["message"]
    for method, path, body in (("post", "/api/knowledge", {"task": "t", "content": "c", "types": ["tool"]}),
                               ("patch", f"/api/knowledge/{item.id}", {"content": "changed"}),
                               ("post", "/api/knowledge/slim", {})):
        response = getattr(reader, method)(path, body, format="json")
        assert response.status_code == 403, (method, path)
        assert "may not write to any scope" in response.json()["error"]["message"]
    assert viewer.get(f"/api/knowledge/{item.id}").status_code == 200
    assert AuditEvent.objects.filter(operation="knowledge_update").count() == 1  # only the accepted write
