"""Evolve from the detail page: queue, poll, compare, roll back; without an LLM, say how to get one."""
import pytest

from jobs.models import Job
from knowledge.models import Knowledge
from tests.conftest import wait_for
from tests.factories import make_knowledge


@pytest.mark.django_db(transaction=True)
def test_evolve_queues_polls_then_compares_and_rolls_back(curator_client, fake_openai, llm_worker):
    item = make_knowledge(task="Log in to site A", content="Use the password.", embed=False)
    fake_openai.reply_json({"task": "Log in to site A despite the captcha", "content": "Solve the captcha first.",
                            "summary_of_changes": "captcha step"})
    started = curator_client.post(f"/knowledge/{item.id}/evolve/", {"feedback": "the captcha blocks it"})
    body = started.content.decode()
    job = Job.objects.get(kind="evolve")
    assert started.status_code == 200 and f'hx-get="/jobs/{job.id}/" hx-trigger="every 1s"' in body

    wait_for(lambda: Job.objects.get(pk=job.pk).status == "succeeded", timeout=60, message="the evolve job")
    done = curator_client.get(f"/jobs/{job.id}/").content.decode()
    assert "every 1s" not in done  # polling stops
    before, after = done.split("<h3>Before (v1)</h3>")[1].split("<h3>Proposed (now live)</h3>")
    assert "Use the password." in before and "Solve the captcha first." in after and "captcha step" in done
    assert "Roll back</button>" in done and "Accept</a>" in done

    rolled = curator_client.post(f"/jobs/{job.id}/rollback/").content.decode()
    assert "Rolled back" in rolled
    item = Knowledge.objects.get(pk=item.pk)
    assert (item.task, item.content) == ("Log in to site A", "Use the password.")
    assert item.versions.first().content == "Solve the captcha first."  # the evolved text is kept
    assert "Roll back</button>" not in curator_client.get(f"/jobs/{job.id}/").content.decode()


@pytest.mark.django_db
def test_evolve_without_an_llm_or_feedback_explains_in_place(curator_client, settings):
    item = make_knowledge(embed=False)
    settings.KNOWHUB_LLM_MODEL = ""
    response = curator_client.post(f"/knowledge/{item.id}/evolve/", {"feedback": "better"})
    assert response.status_code == 409 and "no LLM is configured" in response.content.decode()
    response = curator_client.post(f"/knowledge/{item.id}/evolve/", {"feedback": ""})
    assert response.status_code == 422 and "feedback: This field is required." in response.content.decode()
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_failed_job_shows_its_error(viewer_client):
    item = make_knowledge(embed=False)
    job = Job.objects.create(kind="evolve", status="failed", subject=item.id, requested_by="user:x", error="LLM timed out")
    body = viewer_client.get(f"/jobs/{job.id}/").content.decode()
    assert "It failed: LLM timed out" in body and "every 1s" not in body


@pytest.mark.django_db
def test_a_finished_evolve_panel_brings_the_items_new_text_versions_and_fields_onto_the_page(curator_client):
    from knowledge import services
    from tests.callers import acting

    item = make_knowledge(task="Log in", content="Use the password.", embed=False)
    job = Job.objects.create(kind="evolve", status="succeeded", subject=item.id, requested_by="user:carl",
                             result={"summary_of_changes": "captcha"})
    services.knowledge_edit(acting(f"job:evolve:{job.id}"), knowledge_id=item.id, content="Solve the captcha first.",
                            job=job)
    panel = curator_client.get(f"/jobs/{job.id}/", HTTP_HX_REQUEST="true").content.decode()
    content = panel.split('<section id="content" class="card" hx-swap-oob="true">')[1].split("</section>")[0]
    assert "Solve the captcha first." in content
    assert '<section id="versions" class="card" hx-swap-oob="true">' in panel and "Use the password." in panel
    assert '<section id="fields" class="card" hx-swap-oob="true">' in panel
    rolled = curator_client.post(f"/jobs/{job.id}/rollback/", HTTP_HX_REQUEST="true").content.decode()
    content = rolled.split('<section id="content" class="card" hx-swap-oob="true">')[1].split("</section>")[0]
    assert "Use the password." in content and "Roll back</button>" not in rolled
    page = curator_client.get(f"/jobs/{job.id}/").content.decode()  # the job's own page: the panel only
    assert 'hx-swap-oob' not in page
