"""Text is stored as sent: content, a resource's body and secret, tag values keep their leading and trailing
whitespace (code its indentation, a password its spaces); one-line names (a task, a resource's title) are trimmed."""
import json

import pytest

from api.mcp_server import _op, _Refused, _run_sync
from knowledge.models import Knowledge
from tests.api.conftest import token
from tests.api.test_hostile_input import assert_invalid

pytestmark = pytest.mark.django_db

CODE = "    def f():\n        return 1\n"
SAVE = {"task": "indented code", "content": CODE, "types": ["tool"]}


def test_content_and_tag_values_come_back_exactly_as_saved_and_edited(agent):
    saved = agent.post("/api/knowledge", {**SAVE, "tags": {"w": "  sp  "}}, format="json")
    assert saved.status_code == 201, saved.content[:300]
    item = agent.get(f"/api/knowledge/{saved.json()['id']}").json()
    assert (item["content"], item["tags"]) == (CODE, {"w": "  sp  "})
    edited = agent.patch(f"/api/knowledge/{item['id']}", {"content": "\t" + CODE, "tags": {"w": " x\n"}}, format="json")
    assert edited.status_code == 200, edited.content[:300]
    assert (edited.json()["content"], edited.json()["tags"]) == ("\t" + CODE, {"w": " x\n"})


def test_a_filter_on_a_tag_value_with_spaces_finds_the_item_saved_with_it(agent):
    item_id = agent.post("/api/knowledge", {**SAVE, "tags": {"w": "  sp  "}}, format="json").json()["id"]
    found = agent.get("/api/knowledge/search", {"q": "indented code", "min_score": 1,
                                                "filters": json.dumps({"op": "EQ", "key": "tags.w", "value": "  sp  "})})
    assert [r["id"] for r in found.json()["results"]] == [item_id]


def test_a_task_is_trimmed_and_an_all_whitespace_task_or_content_is_blank(agent):
    saved = agent.post("/api/knowledge", {**SAVE, "task": "  indented code \n"}, format="json").json()
    assert saved["task"] == "indented code"
    for field in ("task", "content"):
        response = agent.post("/api/knowledge", {**SAVE, field: " \n\t "}, format="json")
        assert "blank" in assert_invalid(response, field)["message"]
        edit = agent.patch(f"/api/knowledge/{saved['id']}", {field: "   "}, format="json")
        assert "blank" in assert_invalid(edit, field)["message"]
    assert Knowledge.objects.get().content == CODE


def test_a_resource_body_and_secret_come_back_exactly_as_saved_and_its_title_trimmed(agent):
    saved = agent.post("/api/resource", {"id": "credentials/site", "title": " Site login ", "body": CODE,
                                         "secure_body": "  pass with spaces  ", "content_type": "credential"},
                       format="json")
    assert saved.status_code in (200, 201), saved.content[:300]
    shown = agent.get("/api/resource/credentials/site", {"reveal": "true"}).json()
    assert (shown["title"], shown["body"], shown["secure_body"]) == ("Site login", CODE, "  pass with spaces  ")


@pytest.mark.django_db(transaction=True)  # _run_sync closes connections as a request's end would
def test_an_mcp_save_keeps_content_and_tag_values_exactly():
    key = token()
    saved = _run_sync(key, _op("knowledge_save", {**SAVE, "tags": {"w": "  sp  "}}))
    stored = Knowledge.objects.get(pk=saved["id"])
    assert (stored.content, stored.tags) == (CODE, {"w": "  sp  "})
    with pytest.raises(_Refused) as refused:
        _run_sync(key, _op("knowledge_save", {**SAVE, "content": "  "}))
    assert refused.value.error["fields"].keys() == {"content"}
