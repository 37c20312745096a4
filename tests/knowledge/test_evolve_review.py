"""Evolve under review (issue 17): with the setting on (everywhere or per scope) the rewrite waits as a proposal
until a curator accepts it; off, evolve applies at once as before."""
import pytest

from jobs.models import Job
from knowledge import evolve
from knowledge.models import Knowledge, KnowledgeVersion
from tests.callers import agent_client, person_in, session_client
from tests.factories import make_knowledge

REWRITE = {"task": "Log in to site A despite the captcha", "content": "Solve the captcha first.", "summary_of_changes": "captcha"}


@pytest.fixture
def curator(django_user_model):
    return session_client(person_in(django_user_model, "curator", "carl"))


def evolved(item, fake_openai, feedback="mention the captcha") -> Job:
    """An evolve job asked for through the service and run in process (the worker runs this same function)."""
    job = evolve.evolve_request(agent_caller(), knowledge_id=item.id, feedback=feedback)
    fake_openai.reply_json(REWRITE)
    return evolve.evolve_run(job_id=str(job.id), worker="test")


def agent_caller():
    from tests.callers import acting

    return acting("agent:research_agent")


@pytest.mark.django_db
def test_under_review_the_rewrite_waits_and_goes_live_only_when_accepted(settings, fake_openai, curator):
    settings.KNOWHUB_EVOLVE_REVIEW = True
    item = make_knowledge(task="Log in to site A", content="Use the stored password.", embed=False)
    job = evolved(item, fake_openai)
    assert job.status == "succeeded" and job.result["review"] == "pending" and job.result["proposal"]["task"] == REWRITE["task"]
    assert Knowledge.objects.get(pk=item.id).task == "Log in to site A" and not KnowledgeVersion.objects.exists()

    accepted = curator.post(f"/api/jobs/{job.id}/accept")
    assert accepted.status_code == 200 and accepted.json()["task"] == REWRITE["task"]
    version = KnowledgeVersion.objects.get(knowledge_id=item.id)
    assert (version.task, version.job_id, version.changed_by) == ("Log in to site A", job.id, "user:carl")
    assert Job.objects.get(pk=job.id).result["review"] == "accepted"
    assert curator.post(f"/api/jobs/{job.id}/accept").status_code == 409  # once
    rolled = curator.post(f"/api/jobs/{job.id}/rollback")  # an accepted rewrite rolls back like any evolve
    assert rolled.status_code == 200 and rolled.json()["task"] == "Log in to site A"


@pytest.mark.django_db
def test_a_rejected_rewrite_leaves_the_item_unchanged_and_keeps_the_proposal(settings, fake_openai, curator):
    settings.KNOWHUB_EVOLVE_REVIEW = True
    item = make_knowledge(task="Log in to site A", content="Use the stored password.", embed=False)
    job = evolved(item, fake_openai)
    rejected = curator.post(f"/api/jobs/{job.id}/reject")
    assert rejected.status_code == 200 and rejected.json()["result"]["review"] == "rejected"
    assert rejected.json()["result"]["proposal"]["task"] == REWRITE["task"]
    assert Knowledge.objects.get(pk=item.id).task == "Log in to site A"
    assert curator.post(f"/api/jobs/{job.id}/accept").status_code == 409


@pytest.mark.django_db
def test_a_rewrite_of_text_that_changed_since_is_not_accepted(settings, fake_openai, curator):
    settings.KNOWHUB_EVOLVE_REVIEW = True
    item = make_knowledge(task="Log in to site A", content="Use the stored password.", embed=False)
    job = evolved(item, fake_openai)
    curator.patch(f"/api/knowledge/{item.id}", {"content": "Use the password from the vault."}, format="json")
    refused = curator.post(f"/api/jobs/{job.id}/accept")
    assert refused.status_code == 409 and "changed" in refused.json()["error"]["message"]
    assert Knowledge.objects.get(pk=item.id).content == "Use the password from the vault."


@pytest.mark.django_db
def test_review_per_scope_applies_only_to_items_in_those_scopes(settings, fake_openai):
    settings.KNOWHUB_EVOLVE_REVIEW_SCOPES = ["org:careful"]
    careful = make_knowledge(task="Deploy", content="Run the script.", scopes=["org:careful"], embed=False)
    relaxed = make_knowledge(task="Deploy", content="Run the script.", scopes=["org:acme"], embed=False)
    assert evolved(careful, fake_openai).result["review"] == "pending"
    assert "review" not in evolved(relaxed, fake_openai).result  # the default: applied at once
    assert Knowledge.objects.get(pk=relaxed.id).task == REWRITE["task"]
    assert Knowledge.objects.get(pk=careful.id).task == "Deploy"


@pytest.mark.django_db
def test_only_curators_accept_or_reject(settings, fake_openai, django_user_model):
    settings.KNOWHUB_EVOLVE_REVIEW = True
    item = make_knowledge(task="Log in to site A", content="Use the stored password.", embed=False)
    job = evolved(item, fake_openai)
    viewer = session_client(person_in(django_user_model, "viewer", "vera"))
    for client in (viewer, agent_client("research_agent", ["org:acme"]), agent_client("x", ["org:other"], can_curate=True)):
        assert client.post(f"/api/jobs/{job.id}/accept").status_code in (403, 404)
    assert Knowledge.objects.get(pk=item.id).task == "Log in to site A"


@pytest.mark.django_db
def test_the_item_page_shows_the_proposal_and_accepting_there_puts_it_live(settings, fake_openai, django_user_model):
    from django.test import Client

    settings.KNOWHUB_EVOLVE_REVIEW = True
    item = make_knowledge(task="Log in to site A", content="Use the stored password.", embed=False)
    job = evolved(item, fake_openai)
    browser = Client()
    browser.force_login(person_in(django_user_model, "curator", "cara"))
    panel = browser.get(f"/jobs/{job.id}/").content.decode()
    assert "Under review" in panel and REWRITE["content"] in panel and f"/jobs/{job.id}/accept/" in panel
    done = browser.post(f"/jobs/{job.id}/accept/", HTTP_HX_REQUEST="true").content.decode()
    assert "Accepted (now live)" in done and 'id="content"' in done and REWRITE["content"] in done
    assert "Under review" not in done


# Roll back (applied at once, the default): it puts back the text the job replaced only while the item still has the
# text the job wrote, once.

def rolled_back_text(item_id) -> tuple[str, str]:
    item = Knowledge.objects.get(pk=item_id)
    return item.task, item.content


@pytest.mark.django_db
def test_a_second_rollback_after_an_edit_is_409_and_keeps_the_edit(fake_openai, curator):
    item = make_knowledge(task="Log in to site A", content="Use the stored password.", embed=False)
    job = evolved(item, fake_openai)
    assert curator.post(f"/api/jobs/{job.id}/rollback").status_code == 200
    owner = agent_client("research_agent", ["org:acme"])
    assert owner.patch(f"/api/knowledge/{item.id}", {"content": "OWNER's newer fix"}, format="json").status_code == 200
    versions = KnowledgeVersion.objects.filter(knowledge_id=item.id).count()

    again = curator.post(f"/api/jobs/{job.id}/rollback")
    assert again.status_code == 409 and "rolled back already" in again.json()["error"]["message"]
    assert rolled_back_text(item.id) == ("Log in to site A", "OWNER's newer fix")
    assert KnowledgeVersion.objects.filter(knowledge_id=item.id).count() == versions  # nothing written


@pytest.mark.django_db
def test_rolling_back_twice_without_an_edit_is_409_the_second_time_and_changes_nothing(fake_openai, curator):
    item = make_knowledge(task="Log in to site A", content="Use the stored password.", embed=False)
    job = evolved(item, fake_openai)
    assert curator.post(f"/api/jobs/{job.id}/rollback").status_code == 200
    before = list(KnowledgeVersion.objects.filter(knowledge_id=item.id).values_list("number", "content"))
    assert curator.post(f"/api/jobs/{job.id}/rollback").status_code == 409
    assert rolled_back_text(item.id) == ("Log in to site A", "Use the stored password.")
    assert list(KnowledgeVersion.objects.filter(knowledge_id=item.id).values_list("number", "content")) == before


@pytest.mark.django_db
def test_a_rollback_after_a_later_edit_or_evolve_is_409_and_reverts_neither(fake_openai, curator):
    item = make_knowledge(task="Log in to site A", content="Use the stored password.", embed=False)
    job = evolved(item, fake_openai)
    curator.patch(f"/api/knowledge/{item.id}", {"content": "Solve the captcha, then use the vault."}, format="json")
    refused = curator.post(f"/api/jobs/{job.id}/rollback")
    assert refused.status_code == 409 and "changed" in refused.json()["error"]["message"]
    assert rolled_back_text(item.id) == (REWRITE["task"], "Solve the captcha, then use the vault.")

    later = evolve.evolve_request(agent_caller(), knowledge_id=item.id, feedback="shorter")
    fake_openai.reply_json({"task": "Log in to site A", "content": "Captcha, then vault.", "summary_of_changes": "short"})
    evolve.evolve_run(job_id=str(later.id), worker="test")
    assert curator.post(f"/api/jobs/{job.id}/rollback").status_code == 409  # the earlier job: the later one's text stays
    assert rolled_back_text(item.id) == ("Log in to site A", "Captcha, then vault.")
    assert curator.post(f"/api/jobs/{later.id}/rollback").status_code == 200  # the latest job rolls back
    assert rolled_back_text(item.id) == (REWRITE["task"], "Solve the captcha, then use the vault.")


@pytest.mark.django_db
def test_a_rollback_puts_back_the_text_only_and_keeps_tags_changed_since(fake_openai, curator):
    item = make_knowledge(task="Log in to site A", content="Use the stored password.", tags={"site": "a"}, embed=False)
    job = evolved(item, fake_openai)
    curator.patch(f"/api/knowledge/{item.id}", {"tags": {"site": "a", "auth": "captcha"}}, format="json")
    rolled = curator.post(f"/api/jobs/{job.id}/rollback")
    assert rolled.status_code == 200 and rolled.json()["content"] == "Use the stored password."
    assert Knowledge.objects.get(pk=item.id).tags == {"site": "a", "auth": "captcha"}


@pytest.mark.django_db(transaction=True)
def test_of_two_rollbacks_of_one_job_at_once_exactly_one_succeeds(fake_openai, monkeypatch):
    """Both requests read the job's outcome before either writes (the barrier holds the first writer back for as
    long as it takes the other to get there): only the item's lock, taken before the outcome is read, keeps the
    second from rolling back too."""
    import threading

    from django.db import connections

    from knowledge import services
    from knowledge.errors import KnowledgeStateError
    from tests.callers import acting

    item = make_knowledge(task="Log in to site A", content="Use the stored password.", embed=False)
    job = Job.objects.create(kind="evolve", subject=item.id, requested_by="agent:research_agent",
                             params={"feedback": "mention the captcha", "model": "fake-model"})  # not sent to a broker
    fake_openai.reply_json(REWRITE)
    assert evolve.evolve_run(job_id=str(job.id), worker="test").status == "succeeded"
    ready = threading.Barrier(2, timeout=3)
    edit = services.knowledge_edit

    def edit_when_both_are_ready(*args, **kwargs):
        try:
            ready.wait()
        except threading.BrokenBarrierError:
            pass  # the other is waiting for the item's lock
        return edit(*args, **kwargs)

    monkeypatch.setattr(services, "knowledge_edit", edit_when_both_are_ready)
    outcomes = []

    def roll_back():
        try:
            evolve.evolve_rollback(acting("user:carl", curates=True), job=Job.objects.get(pk=job.id))
            outcomes.append("rolled back")
        except KnowledgeStateError:
            outcomes.append("refused")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=roll_back) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["refused", "rolled back"]
    assert rolled_back_text(item.id) == ("Log in to site A", "Use the stored password.")
    restores = KnowledgeVersion.objects.filter(knowledge_id=item.id, reason__startswith="restored version")
    assert restores.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("change", ["revoked", "narrowed to another scope"])
def test_an_evolve_whose_token_changed_after_queueing_fails_and_leaves_the_item_alone(settings, fake_openai, change):
    from agents.models import AgentToken

    item = make_knowledge(task="Log in to site A", content="Use the stored password.", scopes=["org:acme"],
                          owner="agent:research_agent", embed=False)
    agent = agent_client("research_agent", ["org:acme"], writable_scopes=["org:acme"])
    settings.KNOWHUB_LLM_MODEL, settings.OPENAI_API_KEY = "fake", "x"
    job_id = agent.put(f"/api/knowledge/{item.id}", {"evolve_feedback": "mention the captcha"}, format="json").json()["job"]["id"]
    tokens = AgentToken.objects.filter(agent_id="research_agent")
    if change == "revoked":
        tokens.update(is_active=False)
    else:
        tokens.update(readable_scopes=["org:beta"], writable_scopes=["org:beta"])
    fake_openai.reply_json(REWRITE)

    job = evolve.evolve_run(job_id=job_id, worker="test")

    assert job.status == "failed" and ("revoked" in job.error or "org:acme" in job.error)
    assert Knowledge.objects.get(pk=item.id).task == "Log in to site A" and not KnowledgeVersion.objects.exists()


@pytest.mark.django_db
def test_an_item_archived_while_its_rewrite_is_written_is_not_rewritten(fake_openai, monkeypatch):
    from knowledge import llm

    item = make_knowledge(task="Log in to site A", content="Use the stored password.", embed=False)
    job = evolve.evolve_request(agent_caller(), knowledge_id=item.id, feedback="mention the captcha")
    real = llm.chat_json

    def archived_meanwhile(**kwargs):
        Knowledge.objects.filter(pk=item.id).update(status="archived")
        return real(**kwargs)

    monkeypatch.setattr(llm, "chat_json", archived_meanwhile)
    fake_openai.reply_json(REWRITE)

    done = evolve.evolve_run(job_id=str(job.id), worker="test")

    assert done.status == "failed" and "archived" in done.error
    assert Knowledge.objects.get(pk=item.id).task == "Log in to site A" and not KnowledgeVersion.objects.exists()
