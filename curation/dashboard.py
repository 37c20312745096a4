"""What the dashboard shows: counts, items needing attention, recent activity, feedback per day, ranking per week."""
from datetime import datetime, time, timedelta
from math import ceil

from django.db import connection
from django.db.models import Count, F, Func
from django.utils import timezone
from django.utils.translation import gettext as _

from core.estimates import common_shares, estimated_rows, rounded
from curation.browse import with_quality
from curation.labels import label
from jobs.models import Job
from knowledge.models import Conflict, FeedbackCase, Knowledge, KnowledgeVersion
from knowledge.search_log import weekly_trend
from knowledge.slim import slim_proposals_pending
from resources.models import Resource

ATTENTION = 5
HARMFUL_PROBE = 50  # the most harmful items read to bound the lowest quality (lowest_quality)
ESTIMATE_ABOVE = 20_000  # items: past this the dashboard's counts are estimates ("about")
EXPIRING_WITHIN = timedelta(days=7)
CHART_DAYS = 30


def counts() -> dict:
    """Items by status and active items by type: counted, or, past ESTIMATE_ABOVE rows (a pass over the whole
    table each view), estimated from the database's statistics and marked `estimated`."""
    rows = estimated_rows(Knowledge)
    if rows is not None and rows > ESTIMATE_ABOVE and (statuses := common_shares(Knowledge, "status")):
        active = rows * statuses.get(Knowledge.Status.ACTIVE, 0.0)
        by_type = sorted(((t, rounded(active * share)) for t, share in common_shares(Knowledge, "types").items()),
                         key=lambda pair: -pair[1])
        return {"by_status": {status: rounded(rows * share) for status, share in statuses.items()},
                "by_type": [(t, n) for t, n in by_type if n], "total": rounded(rows), "estimated": True}
    by_status = dict(Knowledge.objects.values_list("status").annotate(n=Count("id")).order_by())
    by_type = (Knowledge.objects.filter(status="active").annotate(type=Func(F("types"), function="unnest"))
               .values_list("type").annotate(n=Count("id")).order_by("-n"))
    return {"by_status": by_status, "by_type": list(by_type), "total": sum(by_status.values()), "estimated": False}


def attention() -> dict:
    active = with_quality(Knowledge.objects.filter(status="active").only("id", "task", "score", "helpful", "harmful"))
    soon = timezone.now() + EXPIRING_WITHIN
    return {
        "most_harmful": list(active.filter(harmful__gt=0).order_by("-harmful", "-updated_at")[:ATTENTION]),
        "lowest_quality": lowest_quality(active),
        "expiring": list(Resource.objects.filter(expires_at__lte=soon).order_by("expires_at")[:ATTENTION]),
        "proposals": len(slim_proposals_pending()),
        "conflicts": Conflict.objects.filter(status=Conflict.Status.OPEN, first__status="active", second__status="active").count(),
        "failed_jobs": list(Job.objects.filter(status=Job.Status.FAILED).order_by("-finished_at")[:ATTENTION]),
    }


def lowest_quality(active, *, limit: int = ATTENTION) -> list[Knowledge]:
    """The `limit` active items of lowest quality (score + helpful − 2 × harmful), lowest first, without sorting
    every item where harmful reports exist. No index may hold `helpful` (see Knowledge.Meta), but quality is at
    least 1 − 2 × harmful (score ≥ 1, helpful ≥ 0). Among the HARMFUL_PROBE most harmful items (read from
    knowledge_harmful) the `limit`-th lowest quality is some q, so the `limit` lowest of all are at or
    below q and each has harmful ≥ (1 − q) / 2: only those are sorted (every item when q ≥ 1)."""
    probed = sorted(item.quality for item in active.order_by("-harmful", "-created_at", "id")[:HARMFUL_PROBE])
    least_harmful = max(0, ceil((1 - probed[limit - 1]) / 2)) if len(probed) >= limit else 0
    return list(active.filter(harmful__gte=least_harmful).order_by("quality", "-updated_at")[:limit])


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
    """One row per day of the last `days` (today included, days as the current time zone has them): helpful and
    harmful reports.

    Each (day, kind) is counted on its own range of the (created_at, kind) index, in one statement: an index-only
    count of each day's entries. Grouping the window's reports by their date read every one of them and cast its
    time to a date (36 ms at 100k items with 107k reports in the 30 days, 13 ms this way; BENCHMARKS.md)."""
    start = timezone.localdate() - timedelta(days=days - 1)
    bounds = [timezone.make_aware(datetime.combine(start + timedelta(days=i), time.min)) for i in range(days + 1)]
    table, column = FeedbackCase._meta.db_table, {f.name: f.column for f in FeedbackCase._meta.concrete_fields}
    quote = connection.ops.quote_name
    counted = (f"SELECT count(*) FROM {quote(table)} WHERE {quote(column['created_at'])} >= day.since"
               f" AND {quote(column['created_at'])} < day.until AND {quote(column['kind'])} = kinds.kind")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT day.n, kinds.kind, ({counted}) FROM unnest(%s::timestamptz[], %s::timestamptz[])"
                       f" WITH ORDINALITY AS day(since, until, n), unnest(%s::text[]) AS kinds(kind)",
                       [bounds[:-1], bounds[1:], list(FeedbackCase.Kind.values)])
        found = {(n - 1, kind): count for n, kind, count in cursor.fetchall()}
    return [{"day": start + timedelta(days=i), "helpful": found.get((i, "helpful"), 0),
             "harmful": found.get((i, "harmful"), 0)} for i in range(days)]


def ranking_per_week() -> list[dict]:
    """The ranking as logged on agents' judged searches, per ISO week (people with a role read every scope)."""
    return weekly_trend(readable_scopes=None)
