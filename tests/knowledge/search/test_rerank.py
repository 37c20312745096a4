import pytest

from knowledge.search.fusion import RRF_K, reciprocal_rank_fusion
from knowledge.search.rerank import Candidate, Gate, quality_rerank


def cand(id, relevance, score=3, helpful=0, harmful=0):
    return Candidate(id=id, relevance=relevance, score=score, helpful=helpful, harmful=harmful)


def test_quality_score_is_score_plus_helpful_minus_twice_harmful():
    assert cand("a", 0, score=4, helpful=3, harmful=2).quality_score == 3.0


@pytest.mark.parametrize(
    ("candidates", "min_score", "expected"),
    [
        # below min_score is dropped even when it is the most relevant
        ([cand("a", 0.9, score=2), cand("b", 0.8, score=3)], 3, ["b"]),
        # negative quality is dropped: 3 + 0 - 2*2 = -1
        ([cand("a", 0.9, harmful=2), cand("b", 0.8)], 1, ["b"]),
        # quality exactly 0 is kept: 3 + 1 - 2*2 = 0
        ([cand("a", 0.9, helpful=1, harmful=2)], 1, ["a"]),
        # answers about equally good: more helpful feedback first
        ([cand("a", 0.81), cand("b", 0.80, helpful=2)], 3, ["b", "a"]),
        # unrated items keep relevance order
        ([cand("a", 0.5), cand("b", 0.8), cand("c", 0.6)], 3, ["b", "c", "a"]),
    ],
)
def test_stage_two_drops_and_orders_as_the_seed_says_among_answers(candidates, min_score, expected):
    assert [c.id for c in quality_rerank(candidates, top_k=10, min_score=min_score)] == expected


def test_an_item_with_a_clear_relevance_lead_is_never_cut_by_quality():
    best = cand("exact", 0.95)
    popular = [cand(f"loose{i}", 0.6, score=5, helpful=10) for i in range(8)]
    hits = quality_rerank([*popular, best], top_k=5, min_score=3)
    assert hits[0].id == "exact"


def test_of_two_equal_answers_the_higher_score_and_more_helpful_ranks_first_and_harm_pushes_down_then_out():
    assert [c.id for c in quality_rerank([cand("plain", 0.8), cand("liked", 0.8, score=4, helpful=3)],
                                         top_k=2, min_score=3)] == ["liked", "plain"]
    assert [c.id for c in quality_rerank([cand("plain", 0.8), cand("harmed", 0.81, harmful=1)],
                                         top_k=2, min_score=3)] == ["plain", "harmed"]
    assert [c.id for c in quality_rerank([cand("plain", 0.8), cand("harmed", 0.81, harmful=2)],
                                         top_k=2, min_score=3)] == ["plain"]


def test_nothing_relevant_returns_nothing_and_each_candidate_says_why():
    weak = [cand("a", 0.005), cand("b", 0.015, score=5, helpful=9)]
    assert quality_rerank(weak, top_k=5, min_score=3) == []
    assert all("no candidate answers the query" in c.gate for c in weak)


def test_candidates_far_below_the_best_or_below_the_floor_are_not_eligible():
    candidates = [cand("best", 0.9), cand("far", 0.2, score=5, helpful=20)]
    assert [c.id for c in quality_rerank(candidates, top_k=5, min_score=3, gate=Gate(relative=0.3))] == ["best"]
    assert "the best candidate's" in candidates[1].gate
    candidates = [cand("best", 0.9), cand("weak", 0.01, score=5, helpful=20)]
    assert [c.id for c in quality_rerank(candidates, top_k=5, min_score=3, gate=Gate(floor=0.02))] == ["best"]
    assert "below the floor" in candidates[1].gate


def test_the_gate_and_the_quality_weight_can_be_set_per_call():
    candidates = [cand("a", 0.15), cand("b", 0.12, helpful=5)]
    assert quality_rerank(candidates, top_k=5, min_score=3, gate=Gate(answer=0.0, floor=0.1, relative=0.0), quality_weight=0.0)[0].id == "a"
    assert quality_rerank(candidates, top_k=5, min_score=3, gate=Gate(answer=0.0, floor=0.1, relative=0.0), quality_weight=1.0)[0].id == "b"


def test_stage_two_keeps_top_k_and_marks_the_rest():
    candidates = [cand(str(i), 0.5 + i / 100) for i in range(10)]
    assert [c.id for c in quality_rerank(candidates, top_k=3, min_score=1)] == ["9", "8", "7"]
    assert candidates[0].gate == "beyond top 3"


def test_rank_relevance_orders_by_relevance_but_still_filters():
    candidates = [cand("a", 0.5, helpful=5), cand("b", 0.9), cand("c", 0.95, score=1)]
    assert [c.id for c in quality_rerank(candidates, top_k=5, min_score=2, rank="relevance")] == ["b", "a"]


def test_rank_seed_sorts_the_eligible_by_quality_alone():
    candidates = [cand("a", 0.9), cand("b", 0.5, helpful=2)]
    assert [c.id for c in quality_rerank(candidates, top_k=2, min_score=1, rank="seed")] == ["b", "a"]


def test_unknown_rank_mode_is_an_error():
    with pytest.raises(ValueError, match="quality, relevance, seed"):
        quality_rerank([], top_k=1, min_score=1, rank="random")


def test_rrf_sums_reciprocal_ranks_with_k_60():
    fused = dict(reciprocal_rank_fusion({"keyword": ["a", "b"], "vector": ["b", "c"]}))
    assert RRF_K == 60
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["c"] == pytest.approx(1 / 62)


def test_rrf_orders_best_first_and_weights_lists():
    ranked = reciprocal_rank_fusion({"keyword": ["a", "b"], "vector": ["b", "a"]}, weights={"keyword": 2.0})
    assert [item for item, _ in ranked] == ["a", "b"]


def test_convex_combination_normalises_each_list_and_weights_it():
    from knowledge.search.fusion import convex_combination

    fused = dict(convex_combination(
        {"vector": [("a", 0.9), ("b", 0.7), ("c", 0.5)], "keyword": [("c", 0.4), ("b", 0.1)]},
        weights={"vector": 1.0, "keyword": 0.5},
        floors={"keyword": 0.0},
    ))
    # vector: min-max over its own list -> a 1.0, b 0.5, c 0.0; keyword: score / max -> c 1.0, b 0.25
    assert fused["a"] == pytest.approx(1.0)
    assert fused["b"] == pytest.approx(0.5 + 0.5 * 0.25)
    assert fused["c"] == pytest.approx(0.5)


def test_convex_combination_of_a_single_item_list_counts_it_fully():
    from knowledge.search.fusion import convex_combination

    assert convex_combination({"vector": [("a", 0.3)]}, weights={}) == [("a", 1.0)]


def test_keyword_boost_adds_rank_discounted_keyword_shares_to_normalised_vectors():
    from knowledge.search.fusion import keyword_boost

    fused = dict(keyword_boost(
        [("a", 0.8), ("b", 0.6), ("c", 0.4)], [("c", 0.2), ("d", 0.1)], weight=10.0, decay=2.0,
    ))
    assert fused["a"] == pytest.approx(1.0)
    assert fused["b"] == pytest.approx(0.5)
    assert fused["c"] == pytest.approx(0.0 + 10 * 0.2 / 1)
    assert fused["d"] == pytest.approx(10 * 0.1 / 4)


def test_keyword_boost_with_one_list_keeps_that_order():
    from knowledge.search.fusion import keyword_boost

    assert [i for i, _ in keyword_boost([], [("x", 0.3), ("y", 0.5)], weight=1.0, decay=2.0)] == ["x", "y"]
    assert [i for i, _ in keyword_boost([("x", 0.1), ("y", 0.9)], [], weight=1.0, decay=2.0)] == ["y", "x"]


def test_softmax_fusion_lets_a_confident_list_decide_and_an_unsure_one_barely_matter():
    from knowledge.search.fusion import softmax_fusion

    temperatures = {"vector": 1.0, "keyword": 0.01}
    weights = {"vector": 0.9, "keyword": 0.1}
    vector = [("a", 2.0), ("b", 1.9), ("c", 0.0)]  # unsure between a and b
    sure = [("b", 0.50), ("a", 0.20)]  # keyword: b far ahead
    unsure = [("a", 0.301), ("b", 0.300)]  # keyword: a by a hair
    assert [i for i, _ in softmax_fusion({"vector": vector, "keyword": sure}, weights=weights, temperatures=temperatures)][:2] == ["b", "a"]
    assert [i for i, _ in softmax_fusion({"vector": vector, "keyword": unsure}, weights=weights, temperatures=temperatures)][:2] == ["a", "b"]
    fused = dict(softmax_fusion({"vector": vector, "keyword": sure}, weights=weights, temperatures=temperatures))
    assert sum(fused.values()) == pytest.approx(1.0)  # each list spends its weight once


def test_softmax_fusion_of_one_list_keeps_its_order():
    from knowledge.search.fusion import softmax_fusion

    rows = [("x", 3.0), ("y", 1.0), ("z", -2.0)]
    fused = softmax_fusion({"vector": rows, "keyword": []}, weights={"vector": 0.9, "keyword": 0.1}, temperatures={"vector": 1.4, "keyword": 0.01})
    assert [i for i, _ in fused] == ["x", "y", "z"]


@pytest.mark.parametrize(("candidates", "gate", "english", "chinese"), [
    ([cand("a", 0.9), cand("x", 0.005)], Gate(answer=0.95), "no candidate answers the query: the best relevance 0.90 is below 0.95",
     "没有候选能回答该查询：最高相关度 0.90 低于 0.95"),
    ([cand("a", 0.9), cand("x", 0.01)], Gate(floor=0.02), "relevance 0.01 is below the floor 0.02", "相关度 0.01 低于下限 0.02"),
    ([cand("a", 0.9), cand("x", 0.2)], Gate(relative=0.3), "relevance 0.20 is below 0.30 × the best candidate's 0.90",
     "相关度 0.20 低于最佳候选 0.90 的 0.30 倍"),
    ([cand("a", 0.9), cand("x", 0.8, score=2)], Gate(), "score 2 is below min_score 3", "评分 2 低于最低评分 3"),
    ([cand("a", 0.9), cand("x", 0.8, harmful=2)], Gate(), "quality -1 is below 0", "质量分 -1 低于 0"),
    ([cand("a", 0.9), cand("x", 0.8)], Gate(), "beyond top 1", "排在前 1 名之外"),
])
def test_each_gate_reason_is_an_english_sentence_with_a_code_shown_in_the_readers_language(candidates, gate, english, chinese):
    from django.utils import translation

    from curation.labels import gate_reason

    with translation.override("zh-hans"):  # the API's sentence never depends on the language
        quality_rerank(candidates, top_k=1, min_score=3, gate=gate)
        left_out = candidates[1]
        assert left_out.gate == english and left_out.gate_code and gate_reason(left_out) == chinese
    with translation.override("en"):
        assert gate_reason(left_out) == english
