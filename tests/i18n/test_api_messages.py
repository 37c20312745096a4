"""The API's error `code`s stay English identifiers; the human `message` follows Accept-Language."""
import json

import pytest
from rest_framework.test import APIClient

from tests.callers import agent_client

pytestmark = pytest.mark.django_db
CHINESE = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}


def _has_chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def _error(response) -> dict:
    return response.json()["error"]


def _both(send) -> tuple[dict, dict]:
    """The same request without a language and in Chinese: the two error bodies."""
    return _error(send({})), _error(send(CHINESE))


def test_a_missing_field_has_the_same_code_and_a_chinese_message_naming_the_field():
    client = agent_client()
    english, chinese = _both(lambda headers: client.post("/api/knowledge", {"content": "x"}, format="json", **headers))
    assert english["code"] == chinese["code"] == "invalid"
    assert english["message"].startswith("task: ") and "required" in english["message"]
    assert chinese["message"].startswith("task: ") and _has_chinese(chinese["message"])
    assert chinese["fields"].keys() == english["fields"].keys()


def test_an_unknown_item_is_not_found_in_either_language():
    client = agent_client()
    english, chinese = _both(lambda headers: client.get("/api/knowledge/knowledge-20260101-none", **headers))
    assert english["code"] == chinese["code"] == "not_found"
    assert not _has_chinese(english["message"]) and _has_chinese(chinese["message"])


def test_no_token_is_unauthenticated_in_either_language():
    english, chinese = _both(lambda headers: APIClient().get("/api/knowledge", **headers))
    assert english["code"] == chinese["code"] == "not_authenticated"
    assert _has_chinese(chinese["message"]) and not _has_chinese(english["message"])


def test_a_revoked_or_unknown_token_is_refused_in_chinese():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer kh_not-a-real-key")
    english, chinese = _both(lambda headers: client.get("/api/knowledge", **headers))
    assert english["code"] == chinese["code"] == "authentication_failed"
    assert english["message"] == "invalid or revoked token" and chinese["message"] == "令牌无效或已被吊销"


def test_a_read_only_token_is_denied_a_write_in_chinese():
    client = agent_client(writable_scopes=[])
    english, chinese = _both(lambda headers: client.post(
        "/api/knowledge", {"task": "t", "content": "c", "types": ["tool"], "scopes": ["org:acme"]}, format="json", **headers))
    assert english["code"] == chinese["code"] == "permission_denied"
    assert _has_chinese(chinese["message"]) and not _has_chinese(english["message"])


@pytest.mark.parametrize("body", ["{not json", json.dumps({"task": "t", "metadata": {"a": "x\u0000y"}})])
def test_bad_json_is_named_in_chinese(body):
    client = agent_client()
    english, chinese = _both(lambda headers: client.generic(
        "POST", "/api/knowledge", body, content_type="application/json", **headers))
    assert english["code"] == chinese["code"]
    assert english["message"].startswith(chinese["message"].split(":")[0])  # the same path, before the text
    assert _has_chinese(chinese["message"]) and not _has_chinese(english["message"])


def test_an_unknown_api_path_is_not_found_in_chinese():
    english, chinese = _both(lambda headers: APIClient().get("/api/nothing-here", **headers))
    assert english["code"] == chinese["code"] == "not_found"
    assert english["message"] == "no API operation at /api/nothing-here"
    assert chinese["message"] == "/api/nothing-here 处没有 API 操作"


def test_a_throttled_request_keeps_its_code_and_says_so_in_chinese(settings):
    from rest_framework.exceptions import Throttled

    from core.errors import api_exception_handler
    from django.utils import translation

    with translation.override("zh-hans"):
        response = api_exception_handler(Throttled(wait=3), {})
    assert response.status_code == 429 and response.data["error"]["code"] == "throttled"
    assert _has_chinese(response.data["error"]["message"])
