"""Why an item ranks where it does for a query: both search stages, as an agent with every scope sees them."""
from django.utils.translation import gettext as _

from curation.labels import gate_reason, label
from knowledge.models import Knowledge
from knowledge.search import engine

EXPLAIN_TOP_K = 10
DEFAULT_MIN_SCORE = 3


def explain_item(*, item: Knowledge, query: str, top_k: int = EXPLAIN_TOP_K, min_score: int = DEFAULT_MIN_SCORE) -> dict:
    """Stage 1 (candidate rank, keyword/vector scores), stage 2 (kept or why dropped, final rank), filters."""
    result = engine.search(query=query, top_k=top_k, min_score=min_score)
    candidate_ids = [c.id for c in result.candidates]
    hit_ids = [h.id for h in result.hits]
    found = next((c for c in result.candidates if c.id == item.id), None)
    reasons = []
    if item.status != "active":
        reasons.append(_("its status is %(status)s: searches return active items only") % {"status": label(item.status)})
    if found is None and not reasons:
        reasons.append(_("not among the best %(count)s stage-1 candidates: too little keyword or meaning overlap")
                       % {"count": len(candidate_ids)})
    if found is not None and item.id not in hit_ids:
        reasons.append(_("left out: %(why)s") % {"why": gate_reason(found)} if found.gate_code != "beyond_top_k" else
                       _("%(count)s items rank above it (relevance, then quality among equally relevant answers)")
                       % {"count": top_k})
    return {
        "query": query,
        "candidate_rank": candidate_ids.index(item.id) + 1 if found else None,
        "candidate_count": len(candidate_ids),
        "explanation": found.explanation if found else {},
        "final_rank": hit_ids.index(item.id) + 1 if item.id in hit_ids else None,
        "top_k": top_k,
        "min_score": min_score,
        "quality_score": item.quality_score,
        "relevance": found.relevance if found else None,
        "reasons": reasons,
        "notes": [str(note) for note in result.notes],
    }
