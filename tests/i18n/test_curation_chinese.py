"""Curation pages in Simplified Chinese leave no English behind: action messages, typed errors, progress."""
import pytest

from ingest.models import Document
from jobs.models import Job
from tests.callers import person_in
from tests.factories import make_knowledge
from webhooks.models import Subscription

pytestmark = pytest.mark.django_db

CHINESE = {"HTTP_ACCEPT_LANGUAGE": "zh-hans", "HTTP_HX_REQUEST": "true"}


@pytest.fixture
def curator_client(client, django_user_model):
    client.force_login(person_in(django_user_model, "curator", "carl"))
    return client


@pytest.fixture
def viewer_client(client, django_user_model):
    client.force_login(person_in(django_user_model, "viewer", "vera"))
    return client


def test_deleting_a_webhook_says_so_in_chinese(curator_client):
    sub = Subscription.objects.create(url="https://8.8.8.8/hook", event_types=["knowledge.created"],
                                      created_by="user:carl")
    html = curator_client.post(f"/webhooks/{sub.id}/delete/", **CHINESE).content.decode()
    assert "订阅已删除" in html and "Subscription deleted" not in html


def test_evolving_without_an_llm_explains_in_chinese(curator_client, settings):
    settings.KNOWHUB_LLM_MODEL = ""
    item = make_knowledge(embed=False)
    response = curator_client.post(f"/knowledge/{item.id}/evolve/", {"feedback": "更短"}, **CHINESE)
    html = response.content.decode()
    assert response.status_code == 409 and "未配置 LLM" in html and "no LLM is configured" not in html


@pytest.mark.parametrize("language, shown, hidden", [
    ("zh-hans", ["阶段：存储中", "已读取 157", "2 个分块"], ["bytes 157", "stage storing", "chunks 2"]),
    ("en", ["stage: storing", "157\xa0bytes read", "2 chunks"], ["bytes 157", "stage storing"]),
])
def test_a_documents_progress_is_labelled_in_the_pages_language(viewer_client, language, shown, hidden):
    document = Document.objects.create(origin="upload", uri="notes.md", kind="markdown", scopes=["org:acme"],
                                       types=["tool"], chunk_size=1200, chunk_overlap=150, requested_by="user:carl",
                                       status="processing", progress={"stage": "storing", "bytes": 157, "chunks": 2})
    for headers in ({"HTTP_ACCEPT_LANGUAGE": language}, {"HTTP_ACCEPT_LANGUAGE": language, "HTTP_HX_REQUEST": "true"}):
        html = viewer_client.get(f"/documents/{document.id}/", **headers).content.decode()
        assert all(text in html for text in shown), html
        assert not any(text in html for text in hidden)
    listed = viewer_client.get("/documents/", HTTP_ACCEPT_LANGUAGE=language).content.decode()
    assert ("存储中" if language == "zh-hans" else "storing") in listed


def test_a_slim_jobs_counts_are_labelled_in_chinese(viewer_client):
    job = Job.objects.create(kind="slim", status="running", requested_by="user:carl",
                             progress={"pairs_checked": 4, "groups_found": 1, "merged": 0})
    html = viewer_client.get(f"/jobs/{job.id}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "已检查 4 对" in html and "找到 1 组" in html and "groupsfound" not in html and "pairschecked" not in html
