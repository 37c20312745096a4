"""SQL compiled once: the reads and single-row INSERTs every request makes, kept and run with new values.

Compiling a queryset with subqueries costs more CPU than running it (an item with its links and its newest
cases: ~2.4 ms to compile, ~0.5 ms to run, on the bench machine). Its SQL depends on its shape (which
filters, how many values in a list), not on the values. `CompiledRead(build)` compiles `build(**values)`
once per shape, with marker strings standing in for the string values, remembers where each marker went
among the parameters, and then runs that SQL with the real values, turning the rows into model instances
with the compiler's own converters, as the ORM's ModelIterable does.

What a shape is: for each argument, None, a string (substituted), a list or tuple of strings (substituted;
its length is the shape), or any other value (an int, a bool: part of the shape, built in as it is). A
string the ORM does not pass through unchanged as a parameter (inlined, or wrapped as by `__contains`)
cannot be substituted: compiling refuses it with a ValueError, so a misuse fails in tests, never serves
another request's values. Querysets with select_related or prefetch_related are refused likewise.

Per thread, like the querysets knowledge.selectors builds once: a compiler is not shared while in use.

`insert_row(obj)`: what `obj.save(force_insert=True)` does for a plain new row (no signals are sent; none is
listened to), with the INSERT written once per model instead of compiled by the ORM each time (0.3-0.5 ms).
"""
import itertools
import threading
from collections.abc import Callable
from functools import cache
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import Model, QuerySet


def _shape(value) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        return str
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return len(value)
    hash(value)  # anything else is part of the shape as it is, so it must be hashable
    return ("as is", value)


def _strings(values: dict) -> list[str]:
    """The substituted strings of `values`, in the order their markers are made."""
    out = []
    for name in sorted(values):
        value = values[name]
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, (list, tuple)) and _shape(value) == len(value):
            out.extend(value)
    return out


class _Compiled:
    """One shape: the SQL, where each substituted string goes among its parameters, and the compiler."""

    def __init__(self, build: Callable[..., QuerySet], values: dict):
        numbers = itertools.count()

        def marker(_) -> str:
            return f"\u27e6compiled-read-marker-{next(numbers)}\u27e7"

        markers = {}
        for name, value in values.items():
            if isinstance(value, str):
                markers[name] = marker(value)
            elif isinstance(value, (list, tuple)) and _shape(value) == len(value):
                markers[name] = type(value)(marker(v) for v in value)
            else:
                markers[name] = value
        queryset = build(**markers)
        if queryset.query.select_related or queryset._prefetch_related_lookups:
            raise ValueError("CompiledRead: select_related and prefetch_related are not supported")
        self.db = queryset.db
        self.compiler = queryset.query.get_compiler(using=self.db)
        try:
            self.sql, params = self.compiler.as_sql()
        except EmptyResultSet:  # this shape never finds anything (the ORM runs no query either)
            self.sql, params = None, ()
            return
        order = _strings(markers)
        position = {m: i for i, m in enumerate(order)}
        self.params = [(position.get(p) if isinstance(p, str) else None, p) for p in params]
        found = {i for i, _ in self.params if i is not None}
        if found != set(range(len(order))) or any(m in self.sql for m in order):
            raise ValueError(f"CompiledRead: {build.__name__}'s string values are not all plain SQL parameters")
        klass_info = self.compiler.klass_info
        if klass_info.get("related_klass_infos"):
            raise ValueError("CompiledRead: related models are not supported")
        self.model = klass_info["model"]
        fields = klass_info["select_fields"]
        self.start, self.end = fields[0], fields[-1] + 1
        self.names = [column[0].target.attname for column in self.compiler.select[self.start:self.end]]
        self.annotations = list(self.compiler.annotation_col_map.items())
        selected = [column[0] for column in self.compiler.select[:self.compiler.col_count]]
        if self.compiler.has_composite_fields(selected):
            raise ValueError("CompiledRead: composite primary keys are not supported")
        self.converters = self.compiler.get_converters(selected)  # what results_iter would look up for every call

    def run(self, values: dict) -> list:
        if self.sql is None:
            return []
        strings = _strings(values)
        params = [constant if i is None else strings[i] for i, constant in self.params]
        with connections[self.db].cursor() as cursor:
            cursor.execute(self.sql, params)
            rows = cursor.fetchall()
        if self.converters:
            rows = self.compiler.apply_converters(rows, self.converters)
        found = []
        for row in rows:
            obj = self.model.from_db(self.db, self.names, row[self.start:self.end])
            for name, column in self.annotations:
                setattr(obj, name, row[column])
            found.append(obj)
        return found


class CompiledRead:
    """`read(**values)`: the instances `build(**values)` would give, its SQL compiled once per shape and thread."""

    def __init__(self, build: Callable[..., QuerySet]):
        self.build = build
        self._local = threading.local()

    def __call__(self, **values) -> list:
        shape = tuple((name, _shape(values[name])) for name in sorted(values))
        compiled = self._local.__dict__.setdefault("compiled", {})
        if shape not in compiled:
            compiled[shape] = _Compiled(self.build, values)
        return compiled[shape].run(values)


@cache
def _insert_sql(model: type[Model], alias: str, with_auto_pk: bool, unless_taken: bool) -> tuple[str, list]:
    meta, connection = model._meta, connections[alias]
    quote = connection.ops.quote_name
    fields = [f for f in meta.concrete_fields if with_auto_pk or f is not meta.auto_field]
    sql = (f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
           f"VALUES ({', '.join(['%s'] * len(fields))})")
    if unless_taken:
        sql += " ON CONFLICT DO NOTHING"
    if meta.auto_field is not None and not with_auto_pk:
        sql += f" RETURNING {quote(meta.auto_field.column)}"
    return sql, fields


def insert_row(obj: Model, *, using: str = "default", unless_taken: bool = False) -> Model | None:
    """INSERT `obj` as a new row (its auto primary key, when not set, from RETURNING); `obj`, saved. With
    `unless_taken`, None (nothing written) when a unique constraint holds its values already: one statement,
    where the ORM takes a savepoint and an IntegrityError. A row another transaction is writing with the same
    values makes it wait for that transaction's end, as any unique index does."""
    meta, connection = obj._meta, connections[using]
    with_auto_pk = meta.auto_field is None or obj.pk is not None
    sql, fields = _insert_sql(type(obj), using, with_auto_pk, unless_taken)
    values = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        if unless_taken and cursor.rowcount == 0:
            return None
        if not with_auto_pk:
            setattr(obj, meta.auto_field.attname, cursor.fetchone()[0])
    obj._state.adding, obj._state.db = False, using
    return obj


def statement_key(sql: str, params) -> str:
    """The statement with its values in, as the server would run it: a key that tells any two statements apart (the
    repr of a parameter does not: psycopg's shows a Jsonb value's first 35 characters only, so two tag filters
    differing further on read as one)."""
    return connections["default"].ops.compose_sql(sql, params)
