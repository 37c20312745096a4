"""Typed errors of ingest, webhooks and conflicts: the same `code` in both languages, the message in Chinese when asked."""
import pytest

from knowledge.models import Conflict
from tests.callers import agent_client, person_in, session_client
from tests.factories import make_knowledge
from tests.i18n.test_api_messages import _both, _has_chinese

pytestmark = pytest.mark.django_db


@pytest.fixture
def curator(django_user_model):
    return session_client(person_in(django_user_model, "curator", "carl"))


@pytest.mark.parametrize(("url", "english_text", "chinese_text"), [
    ("ftp://example.com/hook", "only http and https URLs can be fetched", "只能获取 http 和 https 的 URL"),
    ("http://user:pw@example.com/", "a URL with credentials (user:password@) cannot be fetched", "不能获取带凭据"),
    ("http://127.0.0.1:9/hook", "is a loopback address: only public addresses can be fetched", "是回环地址：只能获取公网地址"),
])
def test_a_bad_webhook_url_keeps_its_code_and_field_and_is_explained_in_chinese(curator, settings, url, english_text,
                                                                                chinese_text):
    settings.KNOWHUB_WEBHOOK_ALLOW, settings.KNOWHUB_FETCH_ALLOW = [], []
    english, chinese = _both(lambda headers: curator.post(
        "/api/webhooks", {"url": url, "events": ["knowledge.created"]}, format="json", **headers))
    assert english["code"] == chinese["code"] == "invalid" and english["fields"].keys() == chinese["fields"].keys() == {"url"}
    assert english_text in english["message"] and not _has_chinese(english["message"])
    assert chinese["message"].startswith("url: ") and chinese_text in chinese["message"]


def test_an_unsupported_document_type_is_415_with_its_code_and_a_chinese_message():
    writer = agent_client("writer", ["team:a"], writable_scopes=["team:a"])

    def send(headers):
        response = writer.post("/api/documents", {"content": "x", "filename": "photo.png", "scopes": ["team:a"]},
                               format="json", **headers)
        assert response.status_code == 415, response.content
        return response

    english, chinese = _both(send)
    assert english["code"] == chinese["code"] == "invalid" and chinese["fields"].keys() == {"file"}
    assert english["message"].startswith("unsupported document type (file name 'photo.png'): upload Markdown")
    assert chinese["message"].startswith("不支持的文档类型（文件名 'photo.png'）：请上传 Markdown")


def test_an_import_in_an_unknown_format_is_refused_in_chinese(curator):
    english, chinese = _both(lambda headers: curator.post(
        "/api/import", {"content": "x", "filename": "notes.docx", "scopes": ["team:a"]}, format="json", **headers))
    assert english["code"] == chinese["code"]
    assert "the format is taken from the extension" in english["message"] and "格式由扩展名决定" in chinese["message"]


def test_resolving_a_settled_conflict_is_a_conflict_in_either_language(curator):
    first, second = sorted([make_knowledge(task="Deploy on Fridays", embed=False),
                            make_knowledge(task="Never deploy on Fridays", embed=False)], key=lambda k: k.id)
    conflict = Conflict.objects.create(first=first, second=second, kind="contradiction", status="dismissed")
    english, chinese = _both(lambda headers: curator.post(
        f"/api/conflicts/{conflict.id}/resolve", {"action": "keep_both"}, format="json", **headers))
    assert english["code"] == chinese["code"] == "conflict"
    assert english["message"] == f"conflict {conflict.id} is already dismissed; reopen it first"
    assert chinese["message"] == f"冲突 {conflict.id} 已是 dismissed 状态；请先重新打开"


def test_resolving_an_unknown_conflict_is_not_found_in_either_language(curator):
    english, chinese = _both(lambda headers: curator.post(
        "/api/conflicts/999999/resolve", {"action": "dismiss"}, format="json", **headers))
    assert english["code"] == chinese["code"] == "not_found"
    assert not _has_chinese(english["message"]) and _has_chinese(chinese["message"])


def test_a_document_of_too_many_chunks_is_refused_in_the_readers_language():
    from django.utils import translation

    from ingest.chunking import TooManyChunks, chunk
    from ingest.extract import Block, Extracted

    document = Extracted(title="t", blocks=[Block(f"paragraph {n}. " * 200, (f"H{n}",)) for n in range(5)])
    for language, text in (("en", "more than 2 items"), ("zh-hans", "超过 2 个条目")):
        with translation.override(language), pytest.raises(TooManyChunks, match=text):
            chunk(document, max_chunks=2)
