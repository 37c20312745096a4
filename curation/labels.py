"""The stored identifiers a page shows (statuses, types, kinds) as a person reads them, in the current language.

The values stay English identifiers in the database, the API and URLs (`?status=active`); only
their display is translated. An identifier missing here is shown as it is.
"""
from django.template.defaultfilters import filesizeformat
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext_lazy

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
    # a document's stages while it is read (ingest.documents)
    "fetching": _("fetching"), "extracting": _("extracting"), "chunking": _("chunking"), "storing": _("storing"),
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


# A job's or a document's progress, by key (ingest.documents: stage, bytes, chunks; knowledge.slim: the counts)
PROGRESS = {
    "stage": _("stage: %(value)s"),
    "bytes": _("%(value)s read"),
    "chunks": ngettext_lazy("%(value)s chunk", "%(value)s chunks", "value"),
    "pairs_to_check": ngettext_lazy("%(value)s pair to check", "%(value)s pairs to check", "value"),
    "pairs_checked": ngettext_lazy("%(value)s pair checked", "%(value)s pairs checked", "value"),
    "held_back": ngettext_lazy("%(value)s held back", "%(value)s held back", "value"),
    "groups_found": ngettext_lazy("%(value)s group found", "%(value)s groups found", "value"),
    "merged": ngettext_lazy("%(value)s merged", "%(value)s merged", "value"),
    "proposed": ngettext_lazy("%(value)s proposed", "%(value)s proposed", "value"),
    "failed": ngettext_lazy("%(value)s failed", "%(value)s failed", "value"),
}


def progress(values: dict) -> list[str]:
    """Each entry of a progress dict as a person reads it, in the current language (an unknown key as it is)."""
    parts = []
    for key, value in (values or {}).items():
        text = PROGRESS.get(key)
        if text is None:
            parts.append(f"{key} {value}")
        elif key == "stage":
            parts.append(text % {"value": label(value)})
        elif key == "bytes" and isinstance(value, int):
            parts.append(text % {"value": filesizeformat(value)})
        else:
            parts.append(text % {"value": value})
    return parts


def label(value) -> str:
    return LABELS.get(value, value)


def choices(values) -> list[tuple[str, str]]:
    """Form choices for identifiers, each with its translated label."""
    return [(value, label(value)) for value in values]
