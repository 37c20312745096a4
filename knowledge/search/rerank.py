"""Stage 2: the seed's quality rerank, among candidates that answer the query.

quality_score = score + helpful - 2 * harmful (seed 003). The seed orders by
quality, assuming stage 1 kept only answers (its LLM router picks them). Ours
returns nearest neighbours, relevant or not, so first comes a **relevance
gate** on the calibrated relevance (relevance.py, a probability in [0, 1]:
P(the query has an answer here) × P(this candidate is one)): when even the
best candidate is below `ANSWER_FLOOR`, the query has no answer here and
nothing is eligible; otherwise a candidate is eligible when it
reaches `RELEVANCE_FLOOR` and `RELATIVE_FLOOR` × the best one's. So a query
with nothing relevant returns nothing, while an answerable one keeps its
weaker relevant items (another language's version of the answer, say).

Then the seed's rule: drop `score < min_score` or `quality_score < 0`, and
order by `rank`:

- "quality" (the default): relevance + QUALITY_WEIGHT × a bounded quality
  term, (q - NEUTRAL) / (|q - NEUTRAL| + QUALITY_HALF), which is 0 for an
  unrated item (score 3, no feedback) and tends to ±1. Feedback and score so
  decide between items that answer about equally well (relevance within
  QUALITY_WEIGHT) and never lift a weak answer over a clear one, nor a
  non-answer (gated) over any. Measured better than a strict sort by quality
  on every feedback scenario of bench/ranking.py (BENCHMARKS.md);
- "relevance": by relevance alone (quality only filters);
- "seed": the seed's strict sort by quality_score, relevance breaking ties
  (gated like the others).

The thresholds and the weight were chosen with bench/ranking.py on the
development halves of the public sets; each can be overridden per request.
"""
from dataclasses import dataclass, field

from knowledge.quality import quality_score

RANK_MODES = ("quality", "relevance", "seed")
ANSWER_FLOOR = 0.02
RELEVANCE_FLOOR = 0.0
RELATIVE_FLOOR = 0.0
QUALITY_WEIGHT = 0.03
NEUTRAL_QUALITY = 3.0
QUALITY_HALF = 3.0
# Why a candidate is left out: the code stays in the API (explanation.gate_code) and the English sentence in
# explanation.gate; a page shows the code in the reader's language (curation.labels.gate_reason).
GATE_REASONS = {
    "no_answer": "no candidate answers the query: the best relevance {best:.2f} is below {answer:.2f}",
    "below_floor": "relevance {relevance:.2f} is below the floor {floor:.2f}",
    "below_relative": "relevance {relevance:.2f} is below {relative:.2f} × the best candidate's {best:.2f}",
    "below_min_score": "score {score} is below min_score {min_score}",
    "negative_quality": "quality {quality:g} is below 0",
    "beyond_top_k": "beyond top {top_k}",
}


@dataclass
class Candidate:
    id: str
    relevance: float  # calibrated: the probability that the item answers the query
    score: int
    helpful: int
    harmful: int
    fused: float = 0.0  # the item's share of the fused stage-1 mass (orders within a query only)
    explanation: dict = field(default_factory=dict)
    gate: str = ""  # why it is not eligible, in English; empty when it is
    gate_code: str = ""  # the same as a stable identifier (GATE_REASONS), for agents and translated displays
    gate_params: dict = field(default_factory=dict)  # the numbers the reason names
    answers: bool = True  # passed the relevance gate (it may still be dropped for its score or quality)
    evidence: object = None  # relevance.Evidence behind `relevance` (None without a query)

    def leave_out(self, code: str, **params) -> None:
        """Mark it not eligible: the code, its numbers, and the English sentence the API has always shown."""
        self.gate_code, self.gate_params, self.gate = code, params, GATE_REASONS[code].format(**params)

    def clear_gate(self) -> None:
        self.gate_code, self.gate_params, self.gate = "", {}, ""

    @property
    def quality_score(self) -> float:
        return quality_score(self.score, self.helpful, self.harmful)

    @property
    def quality_term(self) -> float:
        lift = self.quality_score - NEUTRAL_QUALITY
        return lift / (abs(lift) + QUALITY_HALF)

    def rank_key(self, rank: str, quality_weight: float) -> tuple:
        if rank == "relevance":
            return (-self.relevance, -self.fused, self.id)
        if rank == "seed":
            return (-self.quality_score, -self.relevance, self.id)
        return (-(self.relevance + quality_weight * self.quality_term), -self.relevance, self.id)


@dataclass(frozen=True)
class Gate:
    answer: float = ANSWER_FLOOR  # the best candidate must reach it, or the query has no answer here
    floor: float = RELEVANCE_FLOOR  # every result must reach it
    relative: float = RELATIVE_FLOOR  # ... and this share of the best candidate's relevance

    def apply(self, candidates: list[Candidate]) -> None:
        """Mark each candidate that is not eligible with the reason (Candidate.gate)."""
        best = max((c.relevance for c in candidates), default=0.0)
        for c in candidates:
            if best < self.answer:
                c.leave_out("no_answer", best=best, answer=self.answer)
            elif c.relevance < self.floor:
                c.leave_out("below_floor", relevance=c.relevance, floor=self.floor)
            elif c.relevance < self.relative * best:
                c.leave_out("below_relative", relevance=c.relevance, relative=self.relative, best=best)
            else:
                c.clear_gate()
            c.answers = not c.gate


def quality_rerank(candidates: list[Candidate], *, top_k: int, min_score: int, rank: str = "quality",
                   gate: Gate | None = None, quality_weight: float = QUALITY_WEIGHT) -> list[Candidate]:
    """The top_k eligible candidates in `rank` order; every candidate's `gate` says why it was left out."""
    if rank not in RANK_MODES:
        raise ValueError(f"rank must be one of {', '.join(RANK_MODES)}")
    (gate or Gate()).apply(candidates)
    for c in candidates:
        if not c.gate and c.score < min_score:
            c.leave_out("below_min_score", score=c.score, min_score=min_score)
        elif not c.gate and c.quality_score < 0:
            c.leave_out("negative_quality", quality=c.quality_score)
    kept = [c for c in candidates if not c.gate]
    kept.sort(key=lambda c: c.rank_key(rank, quality_weight))
    for c in kept[top_k:]:
        c.leave_out("beyond_top_k", top_k=top_k)
    return kept[:top_k]
