"""The query plans of the vector statements a block of code runs, for tests that check which graph or scan serves them."""
from contextlib import contextmanager

from django.db import connection


@contextmanager
def vector_plans():
    """Yields a list that fills with the EXPLAIN output of each statement holding `<=>` run inside the block (explained
    just before it runs, so with its settings)."""
    plans: list[str] = []

    def explain(execute, sql, params, many, context):
        if "<=>" in sql:
            with connection.connection.cursor() as cursor:
                cursor.execute("EXPLAIN " + sql, params)
                plans.append("\n".join(row[0] for row in cursor.fetchall()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(explain):
        yield plans
