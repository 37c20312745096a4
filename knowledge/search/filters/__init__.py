"""Filter expressions for knowledge search, compatible with Agno's `agno.filters`.

Filters only ever narrow a result set: the caller ANDs them with what the
asking agent may see, so no filter can widen visibility. Build them in Python,

    EQ("tags.domain", "coding_style") & IN("types", ["tool", "plan"]) & ~EQ("status", "archived")

or parse Agno's JSON with `parse_filter`:

    {"op": "EQ", "key": "tags.domain", "value": "coding_style"}
    {"op": "IN", "key": "types", "values": ["tool", "plan"]}          (NIN alike; "value": [..] too)
    {"op": "AND" | "OR", "conditions": [...]}    {"op": "NOT", "condition": {...}}
    {"tags.domain": "coding_style", "types": "tool"}   legacy dict: AND of EQ (a list value: IN)
    [filter, filter, ...]                               AND

Keys and what the operators mean on them are in `keys.py`; in short:
strings (id, task, content, owner, message_id, status) compare exactly, in
byte order for GT/LT; CONTAINS is a case-insensitive substring and STARTSWITH a
case-sensitive prefix. On lists (types, scopes, source.urls) EQ means "holds",
IN "shares a value", CONTAINS "holds all" and STARTSWITH "some element starts
with". Numbers (score, helpful, harmful, confidence, quality_score =
score + helpful - 2 * harmful) take numbers or numeric strings. Dates
(created_at, updated_at, source.timestamp) take ISO 8601; a plain date is that
whole UTC day. `tags.<name>` and `source.<member>` are strings, except that a
number given compares numerically with values that look like numbers. NEQ,
NIN and NOT are exact complements, so they match items lacking the tag.

Limits: MAX_DEPTH levels, MAX_CONDITIONS nodes, MAX_VALUES per list,
MAX_STRING_LENGTH per string. Every problem raises FilterError (a ValueError
with `.field == "filters"`) naming the key, the operator or the valid choices.
"""
from knowledge.search.filters.discovery import valid_filter_keys
from knowledge.search.filters.expressions import (
    AND, CONTAINS, EQ, GT, GTE, IN, LT, LTE, MAX_CONDITIONS, MAX_DEPTH, NEQ, NIN, NOT, OPERATORS, OR,
    STARTSWITH, VALID_OPERATORS, FilterExpr, apply_filter, compile_filter, describe, parse_filter,
)
from knowledge.search.filters.keys import KEYS, MAX_STRING_LENGTH, MAX_VALUES, QUALITY_SCORE, FilterError

__all__ = [
    "AND", "CONTAINS", "EQ", "GT", "GTE", "IN", "KEYS", "LT", "LTE", "MAX_CONDITIONS", "MAX_DEPTH",
    "MAX_STRING_LENGTH", "MAX_VALUES", "NEQ", "NIN", "NOT", "OPERATORS", "OR", "QUALITY_SCORE", "STARTSWITH",
    "VALID_OPERATORS", "FilterError", "FilterExpr", "apply_filter", "compile_filter", "describe",
    "parse_filter", "valid_filter_keys",
]


def for_caller(caller, filters=None):
    """The caller's static filters (its token's) AND-ed with `filters` (either may be None): they only ever narrow."""
    combined = [f for f in (caller.static_filters and parse_filter(caller.static_filters), filters) if f]
    return AND(*combined) if combined else None

