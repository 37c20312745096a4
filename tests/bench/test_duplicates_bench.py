"""The duplicates bench (issue 17): its development set's loader and a tiny run through the real candidate step and slim."""
import json

import pytest

from bench import pairs_dev

TINY = [
    {"id": "t-dup", "label": "duplicate",
     "a": {"task": "Reloading nginx safely", "content": "Always run nginx -t to test the configuration before nginx -s reload; a broken config otherwise takes the site down."},
     "b": {"task": "安全地重载 nginx", "content": "重载前先执行 nginx -t 检查配置，再 nginx -s reload，否则配置写错会让网站挂掉。"}},
    {"id": "t-ref", "label": "refinement", "a": "t-dup.a",
     "b": {"task": "Reloading nginx in CI", "content": "Run nginx -t before nginx -s reload; in CI run it in the nginx container with the new config mounted."}},
    {"id": "t-contra", "label": "contradiction",
     "a": {"task": "Kubernetes liveness probe", "content": "The liveness probe must not check the database: when it is down every pod restarts."},
     "b": {"task": "Liveness probe of the API", "content": "Make the liveness probe check the database so a pod without a connection is restarted."}},
    {"id": "t-look", "label": "lookalike",
     "a": {"task": "Timeout for the payments API", "content": "Calls to the payments API need a 30 second timeout."},
     "b": {"task": "Timeout for the search API", "content": "Calls to the search API use a 2 second timeout; fall back to cached results."}},
]


def write_pairs(folder, rows):
    folder.mkdir()
    (folder / "tiny.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return folder


def test_the_hand_written_set_has_every_label_and_enough_contradictions_across_languages():
    data = pairs_dev.load(xquad=None)
    counts = data.counts()
    assert all(counts[label] for label in ("duplicate", "refinement", "contradiction", "lookalike"))
    assert counts["contradiction"] >= 40
    from knowledge.search.text import script_of

    def script(key):
        return script_of(data.items[key].task + data.items[key].content)

    contradictions = [p for p in data.pairs if p.label == "contradiction"]
    assert {script(p.a) != script(p.b) for p in contradictions} == {True, False}  # EN/ZH pairs and one-language pairs


def test_the_loader_derives_translations_and_hard_negatives_from_xquad_and_splits_by_unit_deterministically(tmp_path):
    if not pairs_dev.XQUAD.is_dir():
        pytest.skip("XQuAD-R is not in ../shared/data")
    data = pairs_dev.load(hand_dir=write_pairs(tmp_path / "hand", TINY), articles=2)
    again = pairs_dev.load(hand_dir=tmp_path / "hand", articles=2)
    assert [(p.id, p.split) for p in data.pairs] == [(p.id, p.split) for p in again.pairs]
    xquad = [p for p in data.pairs if p.source == "xquad"]
    assert {p.label for p in xquad} == {"duplicate", "unrelated"}
    sentence = next(p for p in xquad if p.label == "duplicate" and p.a.startswith("en-a00"))
    assert sentence.a.replace("en-", "zh-", 1) == sentence.b  # the same suffix: a translation
    assert all(p.a.split("-")[1] == p.b.split("-")[1] for p in xquad)  # hard negatives: the same article
    assert {p.unit for p in xquad} == {"xquad:a00", "xquad:a01"}
    assert any(len(p.a.split("-")) == 3 for p in xquad if p.unit == "xquad:a01")  # odd articles: whole paragraphs
    by_id = {p.id: p for p in data.pairs}
    assert by_id["t-ref"].unit == by_id["t-dup"].unit and by_id["t-ref"].a == "t-dup.a"  # a named item joins its unit
    for name in pairs_dev.SPLITS:
        half = data.split(name)
        assert all(p.split == name and p.a in half.items and p.b in half.items for p in half.pairs)
    assert {p.split for p in data.pairs} == set(pairs_dev.SPLITS)


@pytest.mark.django_db
def test_a_tiny_run_stores_the_pairs_and_scores_the_candidate_step_and_slim(tmp_path, settings):
    from bench import duplicates

    settings.VAR_DIR = tmp_path / "var"
    data = pairs_dev.load(hand_dir=write_pairs(tmp_path / "hand", TINY), xquad=None)
    key_of = duplicates.store(data)
    assert sorted(key_of.values()) == sorted(data.items)
    rows = [duplicates.measure(data, key_of, split) for split in sorted({p.split for p in data.pairs})]
    by_split = {r["split"]: r for r in rows}
    dup_half = by_split[pairs_dev.split_of("hand:t-dup")]
    assert dup_half["candidates"]["groups"]["duplicate (hand)"] == 1.0  # the translation is found both ways
    assert dup_half["slim"]["recall"] == 1.0 and dup_half["slim"]["gold"] == 1
    assert all(r["candidates"]["cost"] <= 3 for r in rows)  # at most every other item of a half of at most four
    swept = duplicates.sweep(data, key_of, split=pairs_dev.split_of("hand:t-dup"))
    assert swept["candidates"] and swept["slim"]
    assert max(r["recall"] for r in swept["slim"]) == 1.0
