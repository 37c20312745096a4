"""What an LLM's reply may hold that PostgreSQL cannot store, and a job that crashes for a reason of its own: every
caller ends with its work written or its job failed saying why, never a job left "running"."""
import pytest

from jobs.models import Job
from knowledge import evolve, llm, tasks
from knowledge.models import Knowledge
from tests.callers import acting
from tests.factories import make_knowledge

UNSTORABLE = {"task": "Log in\u0000 to site A", "content": "Solve the captcha \ud800 first.",
              "summary_of_changes": "nul\u0000 and a lone \udfff surrogate"}


def asked(item) -> Job:
    return evolve.evolve_request(acting("agent:research_agent"), knowledge_id=item.id, feedback="mention the captcha")


@pytest.mark.django_db
def test_an_applied_rewrite_holding_nul_and_lone_surrogates_is_written_with_replacement_characters(fake_openai):
    item = make_knowledge(task="Log in to site A", content="Use the stored password.", embed=False)
    job = asked(item)
    fake_openai.reply_json(UNSTORABLE)

    done = evolve.evolve_run(job_id=str(job.id), worker="test")

    assert done.status == "succeeded"
    item.refresh_from_db()
    assert (item.task, item.content) == ("Log in\ufffd to site A", "Solve the captcha \ufffd first.")


@pytest.mark.django_db
def test_a_proposal_under_review_holding_them_is_kept_with_replacement_characters(settings, fake_openai):
    settings.KNOWHUB_EVOLVE_REVIEW = True
    item = make_knowledge(task="Log in to site A", content="Use the stored password.", embed=False)
    job = asked(item)
    fake_openai.reply_json(UNSTORABLE)

    done = evolve.evolve_run(job_id=str(job.id), worker="test")

    assert done.status == "succeeded"
    assert done.result["proposal"] == {"task": "Log in\ufffd to site A", "content": "Solve the captcha \ufffd first."}
    assert done.result["summary_of_changes"] == "nul\ufffd and a lone \ufffd surrogate"


def test_every_string_of_a_reply_keys_included_comes_back_storable(settings, fake_openai):
    fake_openai.reply_json({"a\u0000": ["x\ud800", {"deep\udc00": "y\u0000"}], "n": 3})
    schema = {"type": "object"}

    assert llm.chat_json(system="s", user="u", schema=schema, schema_name="any") == \
        {"a\ufffd": ["x\ufffd", {"deep\ufffd": "y\ufffd"}], "n": 3}


def test_a_reply_nested_past_the_recursion_limit_is_an_llm_error_not_a_crash(settings, fake_openai):
    fake_openai.reply_text("[" * 100_000 + "]" * 100_000)

    with pytest.raises(llm.LLMError, match="did not match"):
        llm.chat_json(system="s", user="u", schema={"type": "object"}, schema_name="any")


@pytest.mark.django_db
def test_an_evolve_job_that_crashes_outside_the_llm_fails_saying_why_instead_of_staying_running(fake_openai, monkeypatch):
    item = make_knowledge(task="keep me", content="unchanged", embed=False)
    job = asked(item)

    def crash(*, job_id, worker="", task_id=""):
        Job.objects.filter(pk=job_id).update(status=Job.Status.RUNNING)
        raise RuntimeError("the database refused the row")

    monkeypatch.setattr(evolve, "evolve_run", crash)
    outcome = tasks.run_evolve.apply(args=[str(job.id)])

    assert isinstance(outcome.result, RuntimeError)
    failed = Job.objects.get(pk=job.id)
    assert failed.status == "failed" and failed.error == "RuntimeError: the database refused the row"
    assert Knowledge.objects.get(pk=item.id).content == "unchanged"


def nested(levels: int):
    value = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


def test_valid_json_hundreds_of_levels_deep_is_an_llm_error_naming_the_depth_not_a_recursion_error(fake_openai):
    from knowledge import relation

    fake_openai.reply_json({"relation": "duplicate", "explanation": "same", "extra": nested(500)})

    with pytest.raises(llm.LLMError, match="reply.extra.a.* nests deeper than 32 levels"):
        llm.chat_json(system="s", user="u", schema=relation.SCHEMA, schema_name="knowledge_relation")


def test_a_reply_whose_validation_error_cannot_be_formatted_is_an_llm_error(fake_openai, monkeypatch):
    def unformattable(*args, **kwargs):
        class Unprintable(Exception):
            def __str__(self):
                raise RecursionError("maximum recursion depth exceeded")
        raise Unprintable()

    monkeypatch.setattr(llm.jsonschema, "validate", unformattable)
    fake_openai.reply_json({"relation": "duplicate", "explanation": "same"})

    with pytest.raises(llm.LLMError, match="did not match the any schema: Unprintable"):
        llm.chat_json(system="s", user="u", schema={"type": "object"}, schema_name="any")


@pytest.mark.django_db
def test_an_evolve_job_given_deeply_nested_replies_fails_saying_so_after_its_retries(fake_openai, settings):
    settings.KNOWHUB_RETRY_BACKOFF_SECONDS = 0
    item = make_knowledge(task="keep me", content="unchanged", embed=False)
    job = asked(item)
    for _ in range(tasks.EVOLVE_MAX_RETRIES + 1):
        fake_openai.reply_json({"task": "t", "content": "c", "summary_of_changes": "s", "extra": nested(500)})

    tasks.run_evolve.apply(args=[str(job.id)])

    failed = Job.objects.get(pk=job.id)
    assert failed.status == "failed" and "gave up after 4 attempts" in failed.error, failed.error
    assert "nests deeper than 32 levels" in failed.error and "RecursionError" not in failed.error
    assert Knowledge.objects.get(pk=item.id).content == "unchanged"
