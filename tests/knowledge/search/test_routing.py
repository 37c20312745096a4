"""LLM routing through the real openai client against a loopback server."""
import pytest

from knowledge.search import engine
from knowledge.search.indexing import embed_items
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db


@pytest.fixture
def items():
    made = [
        make_knowledge(task="Log in with Selenium", content="undetected_chromedriver avoids bot checks", embed=False),
        make_knowledge(task="Selenium waits", content="Use explicit waits instead of sleep", embed=False),
        make_knowledge(task="Selenium screenshots", content="driver.save_screenshot on failure", embed=False),
    ]
    embed_items(items=made)
    return made


def test_routing_is_off_unless_asked_for(items, fake_openai):
    result = engine.search(query="selenium", top_k=2, min_score=1)
    assert fake_openai.requests == [] and not result.notes


def test_the_llm_picks_and_orders_the_candidates(items, fake_openai, settings):
    settings.KNOWHUB_SEARCH_ROUTING = "llm"
    chosen = [items[2].id, "knowledge-20990101-made", items[0].id]  # one id it was never offered
    fake_openai.reply_json({"ids": chosen})
    result = engine.search(query="selenium", top_k=1, min_score=1)
    assert [c.id for c in result.candidates] == [items[2].id, items[0].id]
    assert [h.id for h in result.hits] == [items[2].id]
    sent = fake_openai.requests[0]["body"]
    assert sent["model"] == "fake-model"
    assert sent["response_format"]["type"] == "json_schema"
    assert items[1].id in sent["messages"][1]["content"]


@pytest.mark.parametrize("misbehave", ["junk", "wrong_shape", "error"])
def test_a_failing_llm_falls_back_to_fused_order(items, fake_openai, settings, misbehave):
    settings.KNOWHUB_SEARCH_ROUTING = "llm"
    if misbehave == "junk":
        fake_openai.reply_text("I think the first one")
    elif misbehave == "wrong_shape":
        fake_openai.reply_json({"items": [items[0].id]})
    else:
        fake_openai.fail(500)
    result = engine.search(query="selenium waits", top_k=2, min_score=1)
    assert result.hits and result.hits[0].id == items[1].id
    assert "LLM routing unavailable" in result.notes[0]


def test_routing_is_off_when_no_llm_is_configured(items, settings):
    settings.KNOWHUB_SEARCH_ROUTING = "llm"
    settings.KNOWHUB_LLM_MODEL = ""
    result = engine.search(query="selenium", top_k=2, min_score=1)
    assert not result.notes and result.hits


def test_a_note_is_read_in_the_language_of_whoever_shows_it(items, fake_openai, settings):
    from django.utils import translation

    settings.KNOWHUB_SEARCH_ROUTING = "llm"
    fake_openai.fail(500)
    note = engine.search(query="selenium waits", top_k=2, min_score=1).notes[0]
    with translation.override("zh-hans"):
        assert str(note).startswith("LLM 路由不可用（") and str(note).endswith("）；使用融合排序")
    with translation.override("en"):
        assert str(note).startswith("LLM routing unavailable (") and str(note).endswith("); fused order used")
