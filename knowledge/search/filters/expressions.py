"""Filter expression classes (one per operator), their registry, parsing and compiling."""
import json
from datetime import date, datetime
from decimal import Decimal
from functools import reduce
from operator import and_, or_
from typing import Any, ClassVar

from django.db.models import Q, QuerySet
from django.db.models.lookups import GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from knowledge.search.filters.keys import EVERYTHING, NEVER, FilterError, Key, resolve_key

MAX_DEPTH = 8  # levels of nesting; a lone condition is one level
MAX_CONDITIONS = 50  # conditions in one filter, and separately AND / OR / NOT nodes


class FilterExpr:
    """A node of a filter tree; combine with `&`, `|` and `~`."""

    op: ClassVar[str]

    def q(self) -> Q:
        raise NotImplementedError

    def to_dict(self) -> dict:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def children(self) -> list["FilterExpr"]:
        return []

    def __and__(self, other: "FilterExpr") -> "AND":
        if not isinstance(other, FilterExpr):
            return NotImplemented
        return AND(*_flatten(AND, self), *_flatten(AND, other))  # a & b & c stays one level deep

    def __or__(self, other: "FilterExpr") -> "OR":
        if not isinstance(other, FilterExpr):
            return NotImplemented
        return OR(*_flatten(OR, self), *_flatten(OR, other))

    def __invert__(self) -> "NOT":
        return NOT(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FilterExpr) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True, default=str))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()})"


def _flatten(kind: type, expr: FilterExpr) -> list[FilterExpr]:
    return list(expr.expressions) if type(expr) is kind else [expr]


def _jsonable(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return value


def _show(value: Any) -> str:
    value = _jsonable(value)
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return value if isinstance(value, str) else json.dumps(value)


class Condition(FilterExpr):
    """A key, an operator and a value; checked against the key when built."""

    symbol: ClassVar[str]
    value_name: ClassVar[str] = "value"

    def __init__(self, key: str, value: Any):
        self.key = key
        self.value = value
        self.field: Key = resolve_key(key)
        if self.op not in self.field.operators:
            raise FilterError(
                _("operator %(op)s does not apply to key %(key)s (%(type)s); valid operators for it: %(valid)s")
                % {"op": self.op, "key": key, "type": self.field.type_name, "valid": ", ".join(self.field.operators)}
            )
        self.cleaned = self.field.clean(self.op, value)

    def to_dict(self) -> dict:
        return {"op": self.op, "key": self.key, self.value_name: _jsonable(self.value)}

    def describe(self) -> str:
        return f"{self.key} {self.symbol} {_show(self.value)}"


class EQ(Condition):
    """Equal; on a list key (types, scopes, source.urls) the list holds the value."""

    op, symbol = "EQ", "="

    def q(self) -> Q:
        return self.field.equals(self.cleaned)


class NEQ(Condition):
    """Not EQ; matches items that lack the tag or source member too."""

    op, symbol = "NEQ", "!="

    def q(self) -> Q:
        return ~self.field.equals(self.cleaned)


class _Comparison(Condition):
    lookup: ClassVar[type]

    def q(self) -> Q:
        return self.field.compare(self.lookup, self.cleaned)


class GT(_Comparison):
    op, symbol, lookup = "GT", ">", GreaterThan


class GTE(_Comparison):
    op, symbol, lookup = "GTE", ">=", GreaterThanOrEqual


class LT(_Comparison):
    op, symbol, lookup = "LT", "<", LessThan


class LTE(_Comparison):
    op, symbol, lookup = "LTE", "<=", LessThanOrEqual


class _ListCondition(Condition):
    value_name = "values"

    def __init__(self, key: str, values: Any):
        super().__init__(key, values)
        self.values = self.value = list(values) if isinstance(values, (list, tuple, set, frozenset)) else [values]


class IN(_ListCondition):
    """Equal to one of the values; on a list key, the lists share a value."""

    op, symbol = "IN", "in"

    def q(self) -> Q:
        return self.field.one_of(self.cleaned)


class NIN(_ListCondition):
    """Not IN (Agno has no NIN; same shape as IN)."""

    op, symbol = "NIN", "not in"

    def q(self) -> Q:
        return ~self.field.one_of(self.cleaned)


class CONTAINS(Condition):
    """Case-insensitive substring; on a list key, holds every value given (exactly)."""

    op, symbol = "CONTAINS", "contains"

    def q(self) -> Q:
        return self.field.contains(self.cleaned)


class STARTSWITH(Condition):
    """Case-sensitive prefix; on a list key, some element starts with it."""

    op, symbol = "STARTSWITH", "starts with"

    def q(self) -> Q:
        return self.field.startswith(self.cleaned)


def _check_expressions(op: str, expressions: tuple) -> list[FilterExpr]:
    for expr in expressions:
        if not isinstance(expr, FilterExpr):
            raise FilterError(_("%(op)s combines filter expressions, not %(kind)s") % {"op": op, "kind": type(expr).__name__})
    return list(expressions)


class _Group(FilterExpr):
    empty: ClassVar[str]

    def __init__(self, *expressions: FilterExpr):
        self.expressions = _check_expressions(self.op, expressions)

    def children(self) -> list[FilterExpr]:
        return self.expressions

    def to_dict(self) -> dict:
        return {"op": self.op, "conditions": [e.to_dict() for e in self.expressions]}

    def describe(self) -> str:
        return f" {self.op} ".join(_nested(e) for e in self.expressions) or self.empty


class AND(_Group):
    """All of the expressions; with none, everything."""

    op, empty = "AND", "everything"

    def q(self) -> Q:
        return reduce(and_, (e.q() for e in self.expressions)) if self.expressions else EVERYTHING


class OR(_Group):
    """Any of the expressions; with none, nothing."""

    op, empty = "OR", "nothing"

    def q(self) -> Q:
        return reduce(or_, (e.q() for e in self.expressions)) if self.expressions else NEVER


class NOT(FilterExpr):
    op = "NOT"

    def __init__(self, expression: FilterExpr):
        self.expression = _check_expressions(self.op, (expression,))[0]

    def children(self) -> list[FilterExpr]:
        return [self.expression]

    def q(self) -> Q:
        return ~self.expression.q()

    def to_dict(self) -> dict:
        return {"op": self.op, "condition": self.expression.to_dict()}

    def describe(self) -> str:
        return f"NOT {_nested(self.expression)}"


def _nested(expr: FilterExpr) -> str:
    return f"({expr.describe()})" if isinstance(expr, _Group) and len(expr.expressions) > 1 else expr.describe()


OPERATORS: dict[str, type[FilterExpr]] = {
    cls.op: cls for cls in (EQ, NEQ, GT, GTE, LT, LTE, IN, NIN, CONTAINS, STARTSWITH, AND, OR, NOT)
}
VALID_OPERATORS: tuple[str, ...] = tuple(OPERATORS)


def parse_filter(data: Any) -> FilterExpr:
    """A filter tree from Agno's JSON or FilterExpr, ours, a legacy {key: value} dict, Agno's agentic
    [{"key": ..., "value": ...}] list, or any list (AND).

    None, {} and [] mean no condition. Raises FilterError.
    """
    expr = _parse(data, depth=1)
    _check_limits(expr)
    return expr


def _parse(data: Any, *, depth: int) -> FilterExpr:
    # Depth is checked while descending, so a deeply nested document cannot exhaust the stack.
    if depth > MAX_DEPTH:
        raise FilterError(_("filters nest deeper than %(depth)d levels") % {"depth": MAX_DEPTH})
    if isinstance(data, FilterExpr):
        return data
    if callable(getattr(data, "to_dict", None)):  # e.g. agno.filters.EQ
        data = data.to_dict()
    if data is None:
        return AND()
    if isinstance(data, (list, tuple)):
        return AND(*(_parse(item, depth=depth + 1) for item in _bounded(data)))
    if not isinstance(data, dict):
        raise FilterError(
            _('a filter is an object with "op", a {"key": value} object or a list of filters, not %(kind)s')
            % {"kind": type(data).__name__}
        )
    if "op" not in data and set(data) == {"key", "value"} and isinstance(data["key"], str):
        # Agno's agentic filters: the model's [{"key": "tags.domain", "value": "x"}], AND of EQ (IN for a list)
        return IN(data["key"], data["value"]) if isinstance(data["value"], list) else EQ(data["key"], data["value"])
    if "op" not in data:
        return _parse_legacy(data)
    op = data["op"]
    # ASCII letters only, in either case: str.upper() maps "ı" to "I" and "ſ" to "S", so "ıN" would mean IN
    cls = OPERATORS.get(op.upper()) if isinstance(op, str) and op.isascii() else None
    if cls is None:
        raise FilterError(_("unknown filter operator %(op)s; valid operators: %(valid)s") % {
            "op": f"{op!r:.60}", "valid": ", ".join(VALID_OPERATORS)})
    if cls in (AND, OR):
        _expect_fields(data, cls.op, required=("conditions",))
        conditions = data["conditions"]
        if not isinstance(conditions, list):
            raise FilterError(_('%(op)s takes "conditions": a list of filters') % {"op": cls.op})
        return cls(*(_parse(item, depth=depth + 1) for item in _bounded(conditions)))
    if cls is NOT:
        _expect_fields(data, "NOT", required=("condition",))
        if data["condition"] is None or data["condition"] in ([], {}):
            # no condition means everything, whose negation is nothing: almost surely not what was meant
            raise FilterError(_('NOT takes "condition": a filter, not %(value)s') % {"value": json.dumps(data["condition"])})
        return NOT(_parse(data["condition"], depth=depth + 1))
    if issubclass(cls, _ListCondition):  # Agno writes "values"; a "value" (list or single) is accepted too
        names = ("key", "values") if "values" in data else ("key", "value")
        _expect_fields(data, cls.op, required=names)
        return cls(data["key"], data[names[1]])
    _expect_fields(data, cls.op, required=("key", "value"))
    return cls(data["key"], data["value"])


def _parse_legacy(data: dict) -> FilterExpr:
    """Agno's older dict filters: {"tags.domain": "x", "types": ["tool", "plan"]}, AND of EQ / IN."""
    conditions = [
        IN(key, value) if isinstance(value, list) else EQ(key, value) for key, value in _bounded(data).items()
    ]
    return conditions[0] if len(conditions) == 1 else AND(*conditions)


def _bounded(items):
    if len(items) > MAX_CONDITIONS:
        raise FilterError(_("filters are limited to %(most)d conditions, got %(count)d in one list") % {
            "most": MAX_CONDITIONS, "count": len(items)})
    return items


def _expect_fields(data: dict, op: str, *, required: tuple[str, ...]) -> None:
    missing = [name for name in required if name not in data]
    extra = sorted(str(name) for name in data if name != "op" and name not in required)
    if missing or extra:
        wanted = ", ".join(f'"{name}"' for name in ("op", *required))
        problem = (_("missing %(names)s") % {"names": ", ".join(missing)} if missing
                   else _("unexpected %(names)s") % {"names": ", ".join(extra)})
        raise FilterError(_("%(op)s takes %(wanted)s (%(problem)s)") % {"op": op, "wanted": wanted, "problem": problem})


LIMITED = {"conditions": gettext_lazy("filters are limited to %(most)d conditions"),
           "AND/OR/NOT operators": gettext_lazy("filters are limited to %(most)d AND/OR/NOT operators")}


def _check_limits(expr: FilterExpr) -> None:
    counts = {"conditions": 0, "AND/OR/NOT operators": 0}

    def visit(node: FilterExpr, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise FilterError(_("filters nest deeper than %(depth)d levels") % {"depth": MAX_DEPTH})
        kind = "conditions" if isinstance(node, Condition) else "AND/OR/NOT operators"
        counts[kind] += 1
        if counts[kind] > MAX_CONDITIONS:
            raise FilterError(LIMITED[kind] % {"most": MAX_CONDITIONS})
        for child in node.children():
            visit(child, depth + 1)

    visit(expr, 1)


def describe(expr: Any) -> str:
    """A human reading of a filter, e.g. "tags.domain = coding_style AND score >= 3"."""
    return parse_filter(expr).describe()


def compile_filter(expr: Any) -> Q:
    """The `Q` for a filter (anything `parse_filter` takes); it needs no annotation."""
    return parse_filter(expr).q()


def apply_filter(queryset: QuerySet, expr: Any) -> QuerySet:
    """`queryset` narrowed by the filter.

    Adds no annotation: quality_score is compiled inline (score + helpful - 2 * harmful),
    because an annotation named `quality_score` would clash with the model's property of
    that name ("property has no setter") when the rows are loaded as instances.
    """
    return queryset.filter(compile_filter(expr))
