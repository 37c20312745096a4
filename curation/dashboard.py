"""What the dashboard shows: counts, items needing attention, recent activity, feedback per day, ranking per week."""
from datetime import timedelta

from django.db.models import Count, F, Func
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.translation import gettext as _

from curation.browse import with_quality
from curation.labels import label
from jobs.models import Job
from knowledge.models import Conflict, FeedbackCase, Knowledge, KnowledgeVersion
from knowledge.search_log import weekly_trend
from knowledge.slim import slim_proposals_pending
from resources.models import Resource

ATTENTION = 5
EXPIRING_WITHIN = timedelta(days=7)
CHART_DAYS = 30


def counts() -> dict:
    by_status = dict(Knowledge.objects.values_list("status").annotate(n=Count("id")).order_by())
    by_type = (Knowledge.objects.filter(status="active").annotate(type=Func(F("types"), function="unnest"))
               .values_list("type").annotate(n=Count("id")).order_by("-n"))
    return {"by_status": by_status, "by_type": list(by_type), "total": sum(by_status.values())}


def attention() -> dict:
    active = with_quality(Knowledge.objects.filter(status="active"))
    soon = timezone.now() + EXPIRING_WITHIN
    return {
        "most_harmful": list(active.filter(harmful__gt=0).order_by("-harmful", "-updated_at")[:ATTENTION]),
        "lowest_quality": list(active.order_by("quality", "-updated_at")[:ATTENTION]),
        "expiring": list(Resource.objects.filter(expires_at__lte=soon).order_by("expires_at")[:ATTENTION]),
        "proposals": len(slim_proposals_pending()),
        "conflicts": Conflict.objects.filter(status=Conflict.Status.OPEN, first__status="active", second__status="active").count(),
        "failed_jobs": list(Job.objects.filter(status=Job.Status.FAILED).order_by("-finished_at")[:ATTENTION]),
    }


def recent_activity(limit: int = 10) -> list[dict]:
    """Saves (created items), edits, feedback and jobs, newest first."""
    rows = [{"at": k.created_at, "what": _("saved by %(who)s") % {"who": k.owner}, "detail": k.task, "knowledge_id": k.id}
            for k in Knowledge.objects.only("id", "owner", "task", "created_at").order_by("-created_at")[:limit]]
    rows += [{"at": v.created_at, "what": _("edited by %(who)s") % {"who": v.changed_by}, "detail": v.reason, "knowledge_id": v.knowledge_id}
             for v in KnowledgeVersion.objects.order_by("-created_at")[:limit]]
    rows += [{"at": c.created_at, "what": _("%(kind)s report") % {"kind": label(c.kind)}, "detail": c.reported_by, "knowledge_id": c.knowledge_id}
             for c in FeedbackCase.objects.order_by("-created_at")[:limit]]
    rows += [{"at": j.created_at, "what": _("%(kind)s job %(status)s") % {"kind": label(j.kind), "status": label(j.status)}, "detail": j.requested_by, "knowledge_id": j.subject}
             for j in Job.objects.order_by("-created_at")[:limit]]
    return sorted(rows, key=lambda r: r["at"], reverse=True)[:limit]


def feedback_per_day(*, days: int = CHART_DAYS) -> list[dict]:
    """One row per day of the last `days` (today included): helpful and harmful reports."""
    today = timezone.now().date()
    start = today - timedelta(days=days - 1)
    rows = (FeedbackCase.objects.filter(created_at__date__gte=start).annotate(day=TruncDate("created_at"))
            .values_list("day", "kind").annotate(n=Count("id")).order_by())
    found = {(day, kind): n for day, kind, n in rows}
    return [{"day": start + timedelta(days=i), "helpful": found.get((start + timedelta(days=i), "helpful"), 0),
             "harmful": found.get((start + timedelta(days=i), "harmful"), 0)} for i in range(days)]


def ranking_per_week() -> list[dict]:
    """The ranking as logged on agents' judged searches, per ISO week (people with a role read every scope)."""
    return weekly_trend(readable_scopes=None)
