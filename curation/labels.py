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


def label(value) -> str:
    return LABELS.get(value, value)


def choices(values) -> list[tuple[str, str]]:
    """Form choices for identifiers, each with its translated label."""
    return [(value, label(value)) for value in values]
