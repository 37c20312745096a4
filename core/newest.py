"""The newest rows of a history that may grow without bound (reports, versions), with how many it holds: one query."""
from dataclasses import dataclass

from django.db.models import Count, QuerySet, Window


@dataclass
class Newest:
    """The newest rows of a history, and how many it holds in all."""

    rows: list
    total: int

    @property
    def more(self) -> int:
        """How many were left out."""
        return self.total - len(self.rows)


def newest(queryset: QuerySet, *, order_by: str, limit: int | None) -> Newest:
    """The first `limit` rows of `queryset` by `order_by` (every row for None) and the count of all of them, in one
    query: the count is a window over the rows the WHERE keeps, computed before the LIMIT."""
    ordered = queryset.annotate(total_rows=Window(Count("pk"))).order_by(order_by)
    rows = list(ordered if limit is None else ordered[:limit])
    return Newest(rows=rows, total=rows[0].total_rows if rows else 0)
