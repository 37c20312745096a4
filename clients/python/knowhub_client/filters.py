"""Filter expressions as Python objects, producing the JSON KnowHub (and Agno) understand.

Filters only ever narrow a search: the server ANDs them with what the token may see.

>>> from knowhub_client.filters import EQ, IN, GTE
>>> f = EQ("tags.domain", "coding_style") & ~IN("types", ["plan"]) & GTE("score", 4)
>>> f.to_dict()
{'op': 'AND', 'conditions': [{'op': 'EQ', 'key': 'tags.domain', 'value': 'coding_style'},
 {'op': 'NOT', 'condition': {'op': 'IN', 'key': 'types', 'values': ['plan']}},
 {'op': 'GTE', 'key': 'score', 'value': 4}]}

Keys are checked by the server (GET /api/knowledge/filters lists them): `types`, `scopes`,
`owner`, `status`, `score`, `helpful`, `harmful`, `confidence`, `quality_score`,
`created_at`, `updated_at`, `tags.<name>`, `source.<member>`, ...
"""
from __future__ import annotations

from datetime import date, datetime
from typing import Any, ClassVar, Iterable


def _jsonable(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return value


class FilterExpr:
    """A node of a filter tree; combine with `&` (AND), `|` (OR) and `~` (NOT)."""

    op: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def __and__(self, other: FilterExpr) -> AND:
        if not isinstance(other, FilterExpr):
            return NotImplemented
        return AND(*_flatten(AND, self), *_flatten(AND, other))  # a & b & c stays one level deep, as on the server

    def __or__(self, other: FilterExpr) -> OR:
        if not isinstance(other, FilterExpr):
            return NotImplemented
        return OR(*_flatten(OR, self), *_flatten(OR, other))

    def __invert__(self) -> NOT:
        return NOT(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FilterExpr) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self.to_dict()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_dict()!r})"


def _flatten(kind: type, expr: FilterExpr) -> list[FilterExpr]:
    return list(expr.expressions) if type(expr) is kind else [expr]  # type: ignore[attr-defined]


class Condition(FilterExpr):
    """A key, an operator and a value."""

    def __init__(self, key: str, value: Any):
        if not isinstance(key, str) or not key:
            raise ValueError(f"{self.op}: key must be a non-empty string")
        self.key = key
        self.value = value

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "key": self.key, "value": _jsonable(self.value)}


class EQ(Condition):
    """Equal; on a list key (types, scopes, source.urls) the list holds the value."""
    op = "EQ"


class NEQ(Condition):
    """Not EQ; matches items lacking the tag too."""
    op = "NEQ"


class GT(Condition):
    op = "GT"


class GTE(Condition):
    op = "GTE"


class LT(Condition):
    op = "LT"


class LTE(Condition):
    op = "LTE"


class CONTAINS(Condition):
    """Case-insensitive substring; on a list key, holds every value given."""
    op = "CONTAINS"


class STARTSWITH(Condition):
    """Case-sensitive prefix; on a list key, some element starts with it."""
    op = "STARTSWITH"


class _ListCondition(Condition):
    def __init__(self, key: str, values: Iterable[Any] | Any):
        listed = list(values) if isinstance(values, (list, tuple, set, frozenset)) else [values]
        super().__init__(key, listed)
        self.values = listed

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "key": self.key, "values": _jsonable(self.values)}


class IN(_ListCondition):
    """Equal to one of the values; on a list key, the lists share a value."""
    op = "IN"


class NIN(_ListCondition):
    """Not IN."""
    op = "NIN"


class _Group(FilterExpr):
    def __init__(self, *expressions: FilterExpr):
        for expr in expressions:
            if not isinstance(expr, FilterExpr):
                raise TypeError(f"{self.op} combines filter expressions, not {type(expr).__name__}")
        self.expressions = list(expressions)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "conditions": [e.to_dict() for e in self.expressions]}


class AND(_Group):
    """All of the expressions."""
    op = "AND"


class OR(_Group):
    """Any of the expressions."""
    op = "OR"


class NOT(FilterExpr):
    """Not the expression."""

    op = "NOT"

    def __init__(self, expression: FilterExpr):
        if not isinstance(expression, FilterExpr):
            raise TypeError(f"NOT takes a filter expression, not {type(expression).__name__}")
        self.expression = expression

    def to_dict(self) -> dict[str, Any]:
        return {"op": "NOT", "condition": self.expression.to_dict()}


OPERATORS: dict[str, type[FilterExpr]] = {
    cls.op: cls for cls in (EQ, NEQ, GT, GTE, LT, LTE, IN, NIN, CONTAINS, STARTSWITH, AND, OR, NOT)
}


def filter_json(filters: Any) -> Any:
    """JSON for a filter: our objects, Agno's `FilterExpr` (anything with `to_dict`), dicts or lists of them."""
    if filters is None:
        return None
    if callable(getattr(filters, "to_dict", None)):
        return filters.to_dict()
    if isinstance(filters, (list, tuple)):
        return [filter_json(f) for f in filters]
    return filters
