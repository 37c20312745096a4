"""Row counts from PostgreSQL's statistics, for tables too large to count on every page view.

ANALYZE (autovacuum runs it after a tenth of a table changes) samples up to 30,000 rows per table and
keeps, per column, the share of rows holding each common value (and, for an array column, each common
element). The figures are estimates as of that sample: a page shows them as "about".
"""
import json

from django.db import connection, models


def estimated_rows(model: type[models.Model]) -> int | None:
    """The table's row count as of its last VACUUM or ANALYZE; None when it was never analysed."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [model._meta.db_table])
        row = cursor.fetchone()
    return None if row is None or row[0] < 0 else int(row[0])


def common_shares(model: type[models.Model], field: str) -> dict[str, float]:
    """{value: share of rows} for the column's common values, or, for an array column, {element: share of rows
    containing it}; {} when the column has no statistics. A value too rare for ANALYZE's sample is left out."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT most_common_vals::text::text[], most_common_freqs, most_common_elems::text::text[],"
            " most_common_elem_freqs FROM pg_stats WHERE schemaname = current_schema() AND tablename = %s"
            " AND attname = %s", [model._meta.db_table, model._meta.get_field(field).column])
        row = cursor.fetchone()
    if row is None:
        return {}
    values, shares, elements, element_shares = row
    if elements:  # the element shares end with three summary figures: zip stops before them
        return dict(zip(elements, element_shares))
    return dict(zip(values or [], shares or []))


def rounded(n: float, *, digits: int = 2) -> int:
    """An estimate to `digits` significant digits (98,342 → 98,000): no more precise than it is."""
    n = int(round(n))
    if n <= 0:
        return 0
    scale = 10 ** max(0, len(str(n)) - digits)
    return int(round(n / scale) * scale)


def planned_rows(queryset: models.QuerySet) -> int:
    """The planner's estimate of how many rows `queryset` finds (from the tables' statistics: a fraction of a ms)."""
    plan = json.loads(queryset.order_by().values_list("pk").explain(format="json"))
    return int(plan[0]["Plan"]["Plan Rows"])
