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


def test_the_admin_in_chinese_names_models_actions_columns_and_results_in_chinese(client, curator):
    from tests.factories import make_resource

    client.force_login(curator)
    index = client.get("/admin/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "知识版本" in index and "机密显示事件" in index and "工作进程心跳" in index
    assert "Knowledge versions" not in index and "Reveal events" not in index and "Worker heartbeats" not in index
    item = make_knowledge(embed=False)
    listing = client.get("/admin/knowledge/knowledge/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "归档所选条目" in listing and "Archive the selected items" not in listing
    done = client.post("/admin/knowledge/knowledge/", {"action": "archive", "_selected_action": [item.pk]},
                       HTTP_ACCEPT_LANGUAGE="zh-hans", follow=True).content.decode()
    assert f"已归档 1 个：{item.pk}" in done
    make_resource("code/login", secure_body="pw", scopes=["org:acme"])
    resources = client.get("/admin/resources/resource/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "被使用于" in resources and "used by" not in resources.lower().replace("被使用于", "")
    reveal = client.get("/admin/resources/resource/code/login/reveal/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "显示 code/login (text) 的机密" in reveal and "Reveal the secret of" not in reveal
