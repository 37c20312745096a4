"""Stage 2: the seed's quality rerank.

quality_score = score + helpful - 2 * harmful. Candidates with
score < min_score or quality_score < 0 are dropped. Then, by `rank`:
- "quality" (the seed's behaviour): by quality_score, relevance breaking ties;
- "relevance": by relevance alone (quality only filters);
- "blend": by relevance_norm + BLEND_QUALITY_WEIGHT * quality_norm, where
  relevance_norm is the fused score divided by the best candidate's, and
  quality_norm is quality_score / (quality_score + QUALITY_HALF): 0 for a
  worthless item, 0.5 at QUALITY_HALF, approaching 1 for the best.
"""
from dataclasses import dataclass, field

RANK_MODES = ("quality", "relevance", "blend")
BLEND_QUALITY_WEIGHT = 0.5
QUALITY_HALF = 5.0


@dataclass
class Candidate:
    id: str
    relevance: float
    score: int
    helpful: int
    harmful: int
    explanation: dict = field(default_factory=dict)

    @property
    def quality_score(self) -> float:
        return float(self.score + self.helpful - 2 * self.harmful)

    def blended(self, best_relevance: float) -> float:
        relevance = self.relevance / best_relevance if best_relevance > 0 else 0.0
        quality = max(self.quality_score, 0.0)
        return relevance + BLEND_QUALITY_WEIGHT * quality / (quality + QUALITY_HALF)


def quality_rerank(candidates: list[Candidate], *, top_k: int, min_score: int, rank: str = "quality") -> list[Candidate]:
    if rank not in RANK_MODES:
        raise ValueError(f"rank must be one of {', '.join(RANK_MODES)}")
    kept = [c for c in candidates if c.score >= min_score and c.quality_score >= 0]
    if rank == "quality":
        kept.sort(key=lambda c: (-c.quality_score, -c.relevance, c.id))
    elif rank == "relevance":
        kept.sort(key=lambda c: (-c.relevance, c.id))
    else:
        best = max((c.relevance for c in kept), default=0.0)
        kept.sort(key=lambda c: (-c.blended(best), -c.relevance, c.id))
    return kept[:top_k]
