"""The stored identifiers a page shows (statuses, types, kinds) as a person reads them, in the current language.

The values stay English identifiers in the database, the API and URLs (`?status=active`); only
their display is translated. An identifier missing here is shown as it is.
"""
from django.utils.translation import gettext_lazy as _

LABELS = {
    # knowledge statuses and types
    "active": _("active"), "archived": _("archived"), "merged": _("merged"), "superseded": _("superseded"),
    "user_profile": _("user profile"), "strategy": _("strategy"), "tool": _("tool"), "usecase": _("use case"),
    "definition": _("definition"), "plan": _("plan"),
    # feedback, jobs, documents, webhook deliveries
    "helpful": _("helpful"), "harmful": _("harmful"),
    "queued": _("queued"), "running": _("running"), "succeeded": _("succeeded"), "failed": _("failed"),
    "processing": _("processing"), "done": _("done"), "pending": _("pending"), "upload": _("upload"),
    "evolve": _("evolve"), "slim": _("slim"), "ingest": _("ingest"),
    # conflicts
    "duplicate": _("duplicate"), "refinement": _("refinement"), "contradiction": _("contradiction"),
    "close": _("close (not judged)"), "open": _("open"), "kept_both": _("kept both"), "dismissed": _("dismissed"),
}


# Why a search candidate was left out (knowledge.search.rerank.GATE_REASONS), by code, with the same numbers.
GATE_REASONS = {
    "no_answer": _("no candidate answers the query: the best relevance %(best).2f is below %(answer).2f"),
    "below_floor": _("relevance %(relevance).2f is below the floor %(floor).2f"),
    "below_relative": _("relevance %(relevance).2f is below %(relative).2f × the best candidate's %(best).2f"),
    "below_min_score": _("score %(score)s is below min_score %(min_score)s"),
    "negative_quality": _("quality %(quality)g is below 0"),
    "beyond_top_k": _("beyond top %(top_k)s"),
}


def gate_reason(candidate) -> str:
    """A left-out candidate's reason in the current language (its English `gate` for an unknown code)."""
    text = GATE_REASONS.get(candidate.gate_code)
    return str(text) % candidate.gate_params if text is not None else candidate.gate


def label(value) -> str:
    return LABELS.get(value, value)


def choices(values) -> list[tuple[str, str]]:
    """Form choices for identifiers, each with its translated label."""
    return [(value, label(value)) for value in values]
