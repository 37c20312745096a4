"""`manage.py ranking_eval [--scope S] [--since-days N]`: the ranking scored on agents' judged searches.

Judgments come from feedback sent with a `search_id` (knowledge.search_log). Each judged query is
run again now, with its logged parameters and scopes, and both rankings are scored per scope.
"""
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from knowledge.search_log import AT_K, evaluate, retention_days

NO_JUDGMENTS = ("No judged searches yet: agents send the `search_id` of a search with their helpful/harmful "
                "feedback on its results (PUT /api/knowledge/{id}, batch_update, MCP, the client).")


def report_table(reports) -> list[str]:
    header = (f"{'scope':<28} {'judged':>6} {'helpful':>7}  {f'nDCG@{AT_K} logged':>15} {'now':>6} {'Δ':>7}"
              f"  {f'MRR@{AT_K} logged':>14} {'now':>6} {'Δ':>7}")
    lines = [header, "-" * len(header)]
    for r in reports:
        lines.append(f"{r.scope:<28} {r.judged:>6} {r.relevant:>7}  {r.ndcg_logged:>15.3f} {r.ndcg_now:>6.3f} "
                     f"{r.ndcg_now - r.ndcg_logged:>+7.3f}  {r.mrr_logged:>14.3f} {r.mrr_now:>6.3f} "
                     f"{r.mrr_now - r.mrr_logged:>+7.3f}")
    return lines


class Command(BaseCommand):
    help = "nDCG@10 and MRR@10 of the ranking as logged and as ranked now, on searches agents judged, per scope."

    def add_arguments(self, parser):
        parser.add_argument("--scope", help="only this scope (e.g. org:acme)")
        parser.add_argument("--since-days", type=int, default=None,
                            help="only searches of the last N days (default: all kept, i.e. the retention period)")

    def handle(self, *args, scope=None, since_days=None, **options):
        if since_days is not None and since_days < 1:
            raise CommandError("--since-days must be at least 1")
        since = timezone.now() - timedelta(days=since_days) if since_days else None
        reports = evaluate(scope=scope, since=since)
        if not reports:
            where = f" in scope {scope}" if scope else ""
            self.stdout.write(NO_JUDGMENTS.replace("yet:", f"yet{where}:"))
            return
        window = f"the last {since_days} days" if since_days else f"the kept logs (≤ {retention_days()} days)"
        self.stdout.write(f"Judged searches of {window}; metrics average over searches with a helpful item.")
        for line in report_table(reports):
            self.stdout.write(line)
