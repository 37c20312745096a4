"""Learning from use: agents' searches are logged, and feedback that cites one becomes a judgment.

An agent's search (REST or MCP) is stored as a `SearchLog` and its reply carries the log's id as
`search_id`. Feedback sent with that `search_id` links its `FeedbackCase` to the log, which turns
the log into a judged query: helpful items are relevant, harmful ones judged not relevant.
`evaluate` scores the ranking on those judgments (nDCG@10, MRR@10), as it was logged and as the
engine ranks the same query now, per scope: a team sees whether a ranking change helped its own
agents. Logs stay in their scopes (`search_logs_visible_to`) and are deleted after
KNOWHUB_SEARCH_LOG_RETENTION_DAYS (`search_logs_forget`).

A log's size is bounded whatever the search asked: its query by QUERY_MAX, its results by top_k, its `types` and
`scopes` by the inputs' caps (and cut to LOGGED_LIST_MAX of at most LOGGED_NAME_MAX characters here as well), and its
filter expression, which may lawfully hold thousands of long values, is kept only up to LOGGED_FILTERS_MAX characters
of JSON. A log missing part of its parameters says `"truncated": true`, and is not re-run by `ranked_now`.
"""
import json
import re
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from django.conf import settings
from django.db import connection
from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from core.compiled import insert_row
from knowledge.errors import KnowledgeError
from knowledge.models import FeedbackCase, SearchLog
from knowledge.search.metrics import mean, mrr_at_k, ndcg_at_k

AT_K = 10
LOGGED_FILTERS_MAX = 16_000  # characters of a filter expression's JSON a log keeps; a longer one is left out
LOGGED_LIST_MAX = 50  # names of `types` or `scopes` a log keeps (the inputs take no more: core.fields.SCOPES_MAX)
LOGGED_NAME_MAX = 200  # characters of each (knowledge.limits.SCOPE_MAX)
EVERY_SCOPE = "(every scope)"  # the report's row for logs of people, whose searches saw every scope
DEFAULT_RETENTION_DAYS = 30


def logged_scopes(*, readable_scopes: Iterable[str] | None, requested: Sequence[str] | None) -> list[str] | None:
    """The scopes a search could see: the readable ones, narrowed to those requested (None: every scope).

    When the request named no scope the caller reads, the readable scopes stand (the search may
    still have found items holding a readable and a requested scope).
    """
    if readable_scopes is None:
        return list(requested) if requested else None
    readable = list(readable_scopes)
    narrowed = [s for s in readable if s in set(requested or ())]
    return narrowed or readable


def search_log_record(*, principal: str, readable_scopes: Iterable[str] | None, query: str, top_k: int,
                      min_score: int, types: Sequence[str] | None, scopes: Sequence[str] | None, rank: str,
                      filters, result_ids: Sequence[str]) -> SearchLog:
    """Store one search; `filters` is the filter expression the engine ran (static filters included).

    Committed without waiting for the write-ahead log to reach the disk (`synchronous_commit` off for this one
    transaction: 1.9 instead of 4.5 ms per search on the bench machine): a log is a record of a read, not a write
    anyone was promised, so a database crash may lose the last fraction of a second of logs, and feedback citing one
    of them is refused as an unknown `search_id`. Inside a caller's transaction the log is that transaction's."""
    log = SearchLog(
        principal=principal, scopes=logged_scopes(readable_scopes=readable_scopes, requested=scopes), query=query,
        parameters=logged_parameters(top_k=top_k, min_score=min_score, types=types, scopes=scopes, rank=rank,
                                     filters=filters),
        result_ids=list(result_ids),
    )
    if not connection.get_autocommit():  # in a caller's transaction: that one decides
        return insert_row(log)
    sql, fields = _relaxed_insert_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, [field.get_db_prep_save(getattr(log, field.attname), connection) for field in fields])
    log._state.adding, log._state.db = False, connection.alias
    return log


def logged_parameters(*, top_k: int, min_score: int, types: Sequence[str] | None, scopes: Sequence[str] | None,
                      rank: str, filters) -> dict:
    """What a log keeps of a search's parameters: all of them, unless that would be more than the module's bounds
    allow; then as much as they allow, and `"truncated": true`."""
    types, scopes = list(types or []), list(scopes or [])
    kept_types, kept_scopes = _cut(types), _cut(scopes)
    expression = filters.to_dict() if filters is not None else None
    truncated = kept_types != types or kept_scopes != scopes
    if expression is not None and len(json.dumps(expression, default=str)) > LOGGED_FILTERS_MAX:
        expression, truncated = None, True
    parameters = {"top_k": top_k, "min_score": min_score, "types": kept_types, "scopes": kept_scopes, "rank": rank,
                  "filters": expression}
    if truncated:
        parameters["truncated"] = True
    return parameters


def _cut(names: list[str]) -> list[str]:
    return [str(name)[:LOGGED_NAME_MAX] for name in names[:LOGGED_LIST_MAX]]


@cache
def _relaxed_insert_sql() -> tuple[str, list]:
    """The INSERT of one log as a statement of its own, whose transaction commits without waiting for the disk (every
    search runs it: written once, not compiled by the ORM each time), and its fields. `set_config(..., true)` lasts
    until that transaction's end, which is this statement's; it is read at the commit. A statement rather than BEGIN,
    SET LOCAL, INSERT, COMMIT: one round trip instead of three. In INSERT ... SELECT each value is cast to its
    column's type (an untyped literal in a SELECT list would be text)."""
    fields = SearchLog._meta.concrete_fields
    quote = connection.ops.quote_name
    into = f"INSERT INTO {quote(SearchLog._meta.db_table)} ({', '.join(quote(f.column) for f in fields)})"
    # cast to the type without its length (`varchar(200)` → `varchar`): an explicit cast to varchar(n) would cut a
    # longer value silently, where the column refuses it
    values = ", ".join(f"%s::{re.sub(r'[(][0-9, ]+[)]', '', f.db_type(connection))}" for f in fields)
    return (f"WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)) {into} SELECT {values} FROM relaxed",
            fields)


def search_logs_visible_to(*, readable_scopes: Iterable[str] | None) -> QuerySet[SearchLog]:
    """Logs the caller may see: those with a scope it reads; everything for None (people with a role).

    Logs of people's searches (scopes NULL) are visible only to callers who read every scope.
    """
    logs = SearchLog.objects.all()
    if readable_scopes is not None:
        logs = logs.filter(scopes__overlap=list(readable_scopes))
    return logs


def search_log_visible(*, readable_scopes: Iterable[str] | None, search_id) -> SearchLog | None:
    """The log with this id if the caller may see it; None for one it may not, an unknown or a malformed id."""
    try:
        search_id = uuid.UUID(str(search_id))
    except ValueError:
        return None
    return search_logs_visible_to(readable_scopes=readable_scopes).filter(pk=search_id).first()


def judged_searches(*, readable_scopes: Iterable[str] | None = None, scope: str | None = None,
                    since: datetime | None = None) -> QuerySet[SearchLog]:
    """Visible logs with at least one feedback case, their cases prefetched, oldest first."""
    logs = search_logs_visible_to(readable_scopes=readable_scopes).filter(feedback_cases__isnull=False)
    if scope == EVERY_SCOPE:
        logs = logs.filter(scopes__isnull=True)
    elif scope:
        logs = logs.filter(scopes__contains=[scope])
    if since is not None:
        logs = logs.filter(created_at__gte=since)
    cases = Prefetch("feedback_cases", queryset=FeedbackCase.objects.only("id", "knowledge_id", "kind", "search_id"))
    return logs.distinct().order_by("created_at").prefetch_related(cases)


def judgments(log: SearchLog) -> dict[str, int]:
    """{item id: gain} from the feedback citing this search.

    Each helpful case adds 1 and each harmful one takes 1 away, never below 0; an item reported
    only harmful is in the map with gain 0 (judged not relevant), unlike an item nobody judged.
    """
    return _gains((case.knowledge_id, case.kind) for case in log.feedback_cases.all())


def _gains(cases: Iterable[tuple[str, str]]) -> dict[str, int]:
    """`judgments` from (item id, kind) pairs."""
    net: dict[str, int] = defaultdict(int)
    for item_id, kind in cases:
        net[item_id] += 1 if kind == FeedbackCase.Kind.HELPFUL else -1
    return {item_id: max(gain, 0) for item_id, gain in net.items()}


def ranked_now(log: SearchLog) -> list[str]:
    """The ids the engine returns for the logged query today, with the logged parameters and scopes (none for a log
    whose parameters were truncated, as for one whose filter the parser no longer takes)."""
    from knowledge.search import engine
    from knowledge.search.filters import parse_filter

    params = log.parameters
    if params.get("truncated"):  # the search as it ran is not all there: re-running the rest would be another search
        return []
    try:
        filters = parse_filter(params["filters"]) if params.get("filters") else None
    except KnowledgeError:  # a filter the parser no longer takes: the query finds nothing now
        return []
    result = engine.search(
        query=log.query, top_k=params.get("top_k", 5), min_score=params.get("min_score", 3),
        types=params.get("types") or None, scopes=params.get("scopes") or None,
        filters=filters,
        readable_scopes=log.scopes, rank=params.get("rank", "quality"),
    )
    return [hit.id for hit in result.hits]


@dataclass
class ScopeReport:
    scope: str
    judged: int  # searches with feedback
    relevant: int  # of those, searches with an item judged helpful: the metrics average over these
    ndcg_logged: float
    mrr_logged: float
    ndcg_now: float | None = None
    mrr_now: float | None = None


def _scores(pairs: list[tuple[list[str], dict[str, int]]]) -> tuple[float, float]:
    return (mean([ndcg_at_k(ranked, gains, AT_K) for ranked, gains in pairs]),
            mean([mrr_at_k(ranked, gains, AT_K) for ranked, gains in pairs]))


def evaluate(*, readable_scopes: Iterable[str] | None = None, scope: str | None = None,
             since: datetime | None = None, rerun: bool = True) -> list[ScopeReport]:
    """nDCG@10 and MRR@10 on the judged searches the caller may see, per scope, as logged and (rerun) now.

    A log counts under each of its scopes; `scope` keeps only that one. Searches whose feedback
    found nothing helpful count as judged, but (as in TREC) not in the averages.
    """
    readable = None if readable_scopes is None else set(readable_scopes)
    rows: dict[str, list[tuple[SearchLog, dict[str, int]]]] = defaultdict(list)
    for log in judged_searches(readable_scopes=readable_scopes, scope=scope, since=since):
        for name in log.scopes if log.scopes is not None else [EVERY_SCOPE]:
            if (scope is None or name == scope) and (readable is None or name in readable):
                rows[name].append((log, judgments(log)))
    now_cache: dict = {}
    reports = []
    for name in sorted(rows):
        useful = [(log, gains) for log, gains in rows[name] if any(gains.values())]
        ndcg_logged, mrr_logged = _scores([(log.result_ids, gains) for log, gains in useful])
        report = ScopeReport(scope=name, judged=len(rows[name]), relevant=len(useful), ndcg_logged=ndcg_logged,
                             mrr_logged=mrr_logged)
        if rerun:
            for log, _ in useful:
                if log.pk not in now_cache:
                    now_cache[log.pk] = ranked_now(log)
            report.ndcg_now, report.mrr_now = _scores([(now_cache[log.pk], gains) for log, gains in useful])
        reports.append(report)
    return reports


# Each judged search's nDCG@10 and MRR@10 as logged, averaged per ISO week in the database (a month holds thousands of
# judged searches; a row per week comes back). The definitions are knowledge.search.metrics': `judgments`' gains,
# linear, over log2(rank + 1) (written · ln 2 / ln(rank + 1)), the ideal ranking from every judged item; a judged
# item's rank is its place in the logged results (an id is there once). tests/knowledge/test_search_log.py holds
# this to the Python metrics.
_WEEKLY_TREND = """
WITH gains AS (
    SELECT search_id, knowledge_id, greatest(sum(CASE kind WHEN %s THEN 1 ELSE -1 END), 0)::float8 AS gain
    FROM knowledge_feedbackcase WHERE search_id IN ({visible})
    GROUP BY search_id, knowledge_id
), judged AS (
    SELECT g.search_id, s.created_at, g.gain, array_position(s.result_ids[1:{k}], g.knowledge_id) AS logged_rank,
           row_number() OVER (PARTITION BY g.search_id ORDER BY g.gain DESC) AS ideal_rank
    FROM gains g JOIN knowledge_searchlog s ON s.id = g.search_id
), searches AS (
    SELECT created_at, sum(gain * ln(2) / ln(logged_rank + 1)) AS dcg,
           sum(gain * ln(2) / ln(ideal_rank + 1)) FILTER (WHERE ideal_rank <= {k}) AS idcg,
           min(logged_rank) FILTER (WHERE gain > 0) AS first_helpful
    FROM judged GROUP BY search_id, created_at
)
SELECT date_trunc('week', created_at AT TIME ZONE %s)::date AS starts, count(*) AS judged,
       count(*) FILTER (WHERE idcg > 0) AS relevant,
       coalesce(avg(coalesce(dcg, 0) / idcg) FILTER (WHERE idcg > 0), 0) AS ndcg,
       coalesce(avg(coalesce(1.0 / first_helpful, 0)::float8) FILTER (WHERE idcg > 0), 0) AS mrr
FROM searches GROUP BY starts ORDER BY starts
"""


def weekly_trend(*, readable_scopes: Iterable[str] | None = None, since: datetime | None = None) -> list[dict]:
    """Per ISO week (oldest first): judged searches, those with an item judged helpful, and the mean nDCG@10 and
    MRR@10 of the ranking as logged over the latter, as `evaluate` scores them. One query."""
    logs = search_logs_visible_to(readable_scopes=readable_scopes)
    if since is not None:
        logs = logs.filter(created_at__gte=since)
    visible, params = logs.order_by().values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(_WEEKLY_TREND.format(visible=visible, k=int(AT_K)),
                       [FeedbackCase.Kind.HELPFUL.value, *params, timezone.get_current_timezone_name()])
        rows = cursor.fetchall()
    trend = []
    for starts, judged, relevant, ndcg, mrr in rows:
        year, week, _ = starts.isocalendar()
        trend.append({"week": f"{year}-W{week:02d}", "starts": starts, "judged": judged, "relevant": relevant,
                      "ndcg": ndcg, "mrr": mrr})
    return trend


def retention_days() -> int:
    return int(getattr(settings, "KNOWHUB_SEARCH_LOG_RETENTION_DAYS", DEFAULT_RETENTION_DAYS))


def search_logs_forget(*, older_than: timedelta | None = None) -> int:
    """Delete logs past the retention period; feedback keeps its case, its `search` becomes NULL."""
    cutoff = timezone.now() - (older_than if older_than is not None else timedelta(days=retention_days()))
    deleted, _ = SearchLog.objects.filter(created_at__lt=cutoff).delete()
    return deleted
