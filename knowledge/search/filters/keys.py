"""The keys a filter may name: what each holds, which operators it takes, its SQL.

Every condition built here is two-valued: TRUE or FALSE for every row, never
SQL NULL. That is what makes NEQ, NIN and NOT exact complements of EQ, IN and
the expression they negate; an item without a `domain` tag matches
NEQ("tags.domain", "x") because "its domain is x" is FALSE, not unknown.
Columns are NOT NULL already; lookups into JSON are wrapped in COALESCE(.., false).
"""
import re
import sys
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from functools import reduce
from operator import or_
from typing import Any

from django.db import connection
from django.db.models import (
    BooleanField, Case, CharField, DateTimeField, DecimalField, F, Func,
    Q, TextField, Value, When,
)
from django.db.models.functions import Cast, Coalesce, Collate
from django.db.models.lookups import (
    Exact, GreaterThan, GreaterThanOrEqual, IContains, LessThan, LessThanOrEqual, Regex, StartsWith,
)
from django.utils.translation import gettext as _

from knowledge.errors import KnowledgeError
from knowledge.limits import TAG_NAME
from knowledge.models import KNOWLEDGE_TYPES, Knowledge, KnowledgeStatus
from knowledge.quality import QUALITY

MAX_VALUES = 100  # in one IN / NIN / CONTAINS list
MAX_STRING_LENGTH = 500
SOURCE_STRING_KEYS = ("name", "category", "agent_id", "submitted_by", "message_id")

ALL_OPS = ("EQ", "NEQ", "GT", "GTE", "LT", "LTE", "IN", "NIN", "CONTAINS", "STARTSWITH")
ORDERED_OPS = ("EQ", "NEQ", "GT", "GTE", "LT", "LTE", "IN", "NIN")
LIST_OPS = ("EQ", "NEQ", "IN", "NIN", "CONTAINS", "STARTSWITH")

QUALITY_SCORE = QUALITY
NEVER = Q(pk__in=[])  # Django turns this into "no rows" and its negation into "all rows"
EVERYTHING = ~NEVER

# A tag value that casts to numeric without error; bounded so the cast cannot overflow.
_NUMBER_RE = r"^\s*[-+]?([0-9]{1,100}(\.[0-9]{0,100})?|\.[0-9]{1,100})([eE][-+]?[0-9]{1,3})?\s*$"
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


class FilterError(KnowledgeError, ValueError):
    """A filter that cannot be parsed or applied; `field` is the request field at fault."""

    def __init__(self, message: str, *, field: str = "filters"):
        super().__init__(message, field=field)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _string(key: str, op: str, value: Any) -> str:
    if not isinstance(value, str):
        raise FilterError(_("%(op)s on %(key)s takes a string, not %(kind)s (%(value)s)") % {
            "op": op, "key": key, "kind": _kind(value), "value": f"{value!r:.60}"})
    if len(value) > MAX_STRING_LENGTH:
        raise FilterError(_("%(op)s on %(key)s: strings are limited to %(most)d characters") % {
            "op": op, "key": key, "most": MAX_STRING_LENGTH})
    return value


# A number a filter compares: at most MAX_DIGITS significant digits, its magnitude within 10^±MAX_EXPONENT. PostgreSQL's
# numeric refuses a value past 131,072 digits before the point or 16,383 after; checked here, the filter is refused
# naming `filters` before any SQL runs, instead of the database refusing the query.
MAX_DIGITS = 100
MAX_EXPONENT = 1000


def _number(key: str, op: str, value: Any, *, bounds: tuple[int, int] | None = None, real: bool = False) -> Decimal:
    """`value` as a Decimal the database takes; `bounds`, for a whole-number column, the range its type holds;
    `real`, a double precision column (compared as one: a value must be a normal double's)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal, str)):
        raise FilterError(_("%(op)s on %(key)s takes a number, not %(kind)s (%(value)s)") % {
            "op": op, "key": key, "kind": _kind(value), "value": f"{value!r:.60}"})
    try:
        number = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):  # ValueError: an int past Python's 4,300 digits for str()
        raise FilterError(_("%(op)s on %(key)s takes a number, not %(value)s") % {
            "op": op, "key": key, "value": f"{value!r:.60}"}) from None
    if not number.is_finite():
        raise FilterError(_("%(op)s on %(key)s takes a finite number, not %(value)s") % {
            "op": op, "key": key, "value": f"{value!r:.60}"})
    if number.is_zero():
        return Decimal(0)  # 0E-999999 is zero, and the database would refuse its exponent
    significant = len(bytes(number.as_tuple().digits).rstrip(b"\0"))  # 10**500 is one digit, not 501
    if significant > MAX_DIGITS or abs(number.adjusted()) > MAX_EXPONENT:
        raise FilterError(_("%(op)s on %(key)s: %(value)s is out of range (at most %(digits)d digits, "
                            "between 1e-%(exponent)d and 1e%(exponent)d)") % {
            "op": op, "key": key, "value": f"{value!r:.60}", "digits": MAX_DIGITS, "exponent": MAX_EXPONENT})
    if real and not sys.float_info.min <= abs(number) <= sys.float_info.max:
        raise FilterError(_("%(op)s on %(key)s: %(value)s is out of range (a double precision number: 0, or "
                            "between %(least)s and %(most)s either side of it)") % {
            "op": op, "key": key, "value": f"{value!r:.60}", "least": f"{sys.float_info.min:g}",
            "most": f"{sys.float_info.max:g}"})
    if bounds is not None and not bounds[0] <= number <= bounds[1]:
        raise FilterError(_("%(op)s on %(key)s: %(value)s is out of range (%(key)s is a whole number from "
                            "%(least)s to %(most)s)") % {
            "op": op, "key": key, "value": f"{value!r:.60}", "least": f"{bounds[0]:,}", "most": f"{bounds[1]:,}"})
    return number


def _moment(key: str, op: str, value: Any) -> tuple[datetime, datetime | None]:
    """(start, end of day): `end` is set for a plain date, which means that whole UTC day."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        day = datetime.combine(value, time(), tzinfo=UTC)
        return day, (day + timedelta(days=1) if value < date.max else datetime.max.replace(tzinfo=UTC))
    elif isinstance(value, str) and len(value) <= 64:
        text = value.strip()
        try:
            if _DATE_ONLY.fullmatch(text):
                return _moment(key, op, date.fromisoformat(text))
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise FilterError(
                _("%(op)s on %(key)s: %(value)s is not an ISO 8601 date or datetime "
                  "(e.g. 2026-03-05 or 2026-03-05T12:00:00Z)") % {"op": op, "key": key, "value": repr(value)}
            ) from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        try:  # Agno's examples compare created_at with Unix seconds
            moment = datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            raise FilterError(_("%(op)s on %(key)s: %(value)s is not a valid Unix timestamp") % {
                "op": op, "key": key, "value": repr(value)}) from None
    else:
        raise FilterError(_("%(op)s on %(key)s takes an ISO 8601 date or datetime, not %(kind)s") % {
            "op": op, "key": key, "kind": _kind(value)})
    try:  # in UTC: the database refuses an offset past ±15:59, and one that moves the moment past year 1 or 9999
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC), None
    except OverflowError:
        raise FilterError(_("%(op)s on %(key)s: %(value)s is outside the years 1 to 9999 in UTC") % {
            "op": op, "key": key, "value": repr(value)}) from None


def _values(key: str, op: str, value: Any) -> list:
    values = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
    if len(values) > MAX_VALUES:
        raise FilterError(_("%(op)s on %(key)s: at most %(most)d values, got %(count)d") % {
            "op": op, "key": key, "most": MAX_VALUES, "count": len(values)})
    return values


def _json_text(column: str, member: str) -> Func:
    # Not KT(): it reads "a__b" as a path and "123" as an array index; tag names may be either.
    return Func(F(column), Value(member), function="jsonb_extract_path_text", output_field=CharField())


def _false_if_null(condition) -> Q:
    # A JSON member may be missing or unreadable; NULL must become FALSE or NOT would drop the row.
    return Q(Coalesce(condition, Value(False), output_field=BooleanField()))


def _path_exists(json_value, path: str, prefix: str) -> Func:
    """jsonb_path_exists with the prefix passed as a jsonpath variable: no quoting, no LIKE wildcards.

    Strict mode, so a scalar where a list belongs is not read as a list of one; the
    error that raises is silenced into NULL, hence the COALESCE.
    """
    variables = Func(Value("p"), Cast(Value(prefix), TextField()), function="jsonb_build_object")
    found = Func(json_value, Value(path), variables, Value(True), function="jsonb_path_exists",
                 output_field=BooleanField())
    return Coalesce(found, Value(False), output_field=BooleanField())


class Key:
    """A filterable key. `clean` checks a value; the other methods return a `Q` that narrows."""

    type_name = "string"
    operators: tuple[str, ...] = ALL_OPS
    checked_ops = ("EQ", "NEQ", "IN", "NIN")  # where a value outside `choices` is an error

    def __init__(self, name: str, *, column: str | None = None, choices: tuple[str, ...] = ()):
        self.name = name
        self.column = column or name
        self.choices = choices

    def expression(self):
        return F(self.column)

    def known(self, condition) -> Q:
        return Q(condition)

    def clean_one(self, op: str, value: Any) -> Any:
        value = _string(self.name, op, value)
        if self.choices and op in self.checked_ops and value not in self.choices:
            raise FilterError(_("%(op)s on %(key)s: unknown value %(value)s; valid values: %(valid)s") % {
                "op": op, "key": self.name, "value": repr(value), "valid": ", ".join(self.choices)})
        return value

    def clean(self, op: str, value: Any) -> Any:
        if op in ("IN", "NIN"):
            return [self.clean_one(op, v) for v in _values(self.name, op, value)]
        return self.clean_one(op, value)

    def equals(self, value) -> Q:
        return self.compare(Exact, value)

    def compare(self, lookup, value) -> Q:
        return self.known(lookup(self.expression(), Value(value)))

    def one_of(self, values: list) -> Q:
        return reduce(or_, (self.equals(v) for v in values)) if values else NEVER


class StringKey(Key):
    def compare(self, lookup, value) -> Q:
        if lookup is Exact:
            return super().compare(lookup, value)
        # Byte order rather than the database's collation, so ids and ISO dates sort as text does.
        return self.known(lookup(Collate(self.expression(), "C"), Value(value)))

    def contains(self, value: str) -> Q:
        return self.known(IContains(self.expression(), value))

    def startswith(self, value: str) -> Q:
        return self.known(StartsWith(self.expression(), value))


class JsonStringKey(StringKey):
    """`tags.<name>` and the string members of `source`.

    A number given for EQ/NEQ/IN/NIN/GT/GTE/LT/LTE compares numerically with the
    values that look like numbers; other values never match it. A string compares as text.
    """

    def __init__(self, name: str, *, column: str, member: str):
        super().__init__(name, column=column)
        self.member = member

    def expression(self):
        return _json_text(self.column, self.member)

    def known(self, condition) -> Q:
        return _false_if_null(condition)

    def clean_one(self, op: str, value: Any) -> Any:
        if op not in ("CONTAINS", "STARTSWITH") and isinstance(value, (int, float, Decimal)) \
                and not isinstance(value, bool):
            return _number(self.name, op, value)
        return _string(self.name, op, value)

    def equals(self, value) -> Q:
        if isinstance(value, Decimal):
            return self.compare(Exact, value)
        return Q(**{f"{self.column}__contains": {self.member: value}})  # jsonb @>, never NULL

    def compare(self, lookup, value) -> Q:
        if not isinstance(value, Decimal):
            return super().compare(lookup, value)
        text = self.expression()
        # CASE guards the cast: a value like "high" is skipped, never cast (which would abort the query).
        number = Case(When(Regex(text, _NUMBER_RE), then=Func(text, template="(%(expressions)s)::numeric")),
                      default=None, output_field=DecimalField())
        return self.known(lookup(number, Value(value)))


class ListKey(Key):
    """`types` and `scopes`: EQ/NEQ ask whether the list holds a value, IN/NIN whether it shares one."""

    type_name = "string_list"
    operators = LIST_OPS
    checked_ops = ("EQ", "NEQ", "IN", "NIN", "CONTAINS")

    def clean(self, op: str, value: Any) -> Any:
        if op in ("IN", "NIN", "CONTAINS"):
            return [self.clean_one(op, v) for v in _values(self.name, op, value)]
        return self.clean_one(op, value)

    def equals(self, value: str) -> Q:
        return Q(**{f"{self.column}__contains": [value]})

    def one_of(self, values: list[str]) -> Q:
        return Q(**{f"{self.column}__overlap": values}) if values else NEVER

    def contains(self, values: list[str]) -> Q:
        return Q(**{f"{self.column}__contains": values})

    def startswith(self, prefix: str) -> Q:
        return Q(_path_exists(Func(F(self.column), function="to_jsonb"), "strict $[*] ? (@ starts with $p)", prefix))


class UrlsKey(ListKey):
    """`source.urls`, a JSON array of strings."""

    def equals(self, value: str) -> Q:
        return Q(source__contains={"urls": [value]})

    def one_of(self, values: list[str]) -> Q:
        return Key.one_of(self, values)

    def contains(self, values: list[str]) -> Q:
        return Q(source__contains={"urls": values})

    def startswith(self, prefix: str) -> Q:
        return Q(_path_exists(F("source"), "strict $.urls[*] ? (@ starts with $p)", prefix))


class NumberKey(Key):
    type_name = "number"
    operators = ORDERED_OPS

    def __init__(self, name: str, *, type_name: str = "number", expression=None, bounds: tuple[int, int] | None = None,
                 real: bool = False):
        super().__init__(name)
        self.type_name = type_name
        self._expression = expression
        self.bounds = bounds  # a whole-number column's range (its type's): a value past it is refused
        self.real = real  # a double precision column: values a double holds

    def expression(self):
        return self._expression if self._expression is not None else F(self.column)

    def clean_one(self, op: str, value: Any) -> Decimal:
        return _number(self.name, op, value, bounds=self.bounds, real=self.real)


_TYPE_RANGES = {"smallint": "SmallIntegerField", "integer": "IntegerField", "bigint": "BigIntegerField"}


def _range_of(field_name: str | None = None, *, db_type: str | None = None) -> tuple[int, int]:
    """The range of a whole-number column's type (smallint, integer or bigint; not a field's own bounds: helpful < 0
    is a question, matching nothing), as Django's backend knows it."""
    if field_name is not None:
        db_type = Knowledge._meta.get_field(field_name).db_type(connection)
    return connection.ops.integer_field_range(_TYPE_RANGES[db_type])


class DateKey(Key):
    type_name = "datetime"
    operators = ORDERED_OPS

    def clean_one(self, op: str, value: Any) -> tuple[datetime, datetime | None]:
        return _moment(self.name, op, value)

    def equals(self, moment) -> Q:
        start, end = moment
        if end is None:
            return super().compare(Exact, start)
        return super().compare(GreaterThanOrEqual, start) & super().compare(LessThan, end)

    def compare(self, lookup, moment) -> Q:
        start, end = moment
        if end is not None and lookup in (GreaterThan, LessThanOrEqual):  # after / up to the whole day
            lookup, start = (GreaterThanOrEqual if lookup is GreaterThan else LessThan), end
        return super().compare(lookup, start)


class SourceTimestampKey(DateKey):
    """`source.timestamp`: an ISO string in JSON; values PostgreSQL cannot read never match.

    Needs PostgreSQL 16+ for pg_input_is_valid (the embedded server is 18).
    """

    def expression(self):
        text = _json_text("source", "timestamp")
        valid = Q(Regex(text, r"^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}")) & Q(
            Func(text, Value("timestamptz"), function="pg_input_is_valid", output_field=BooleanField()))
        return Case(When(valid, then=Cast(text, DateTimeField())), default=None, output_field=DateTimeField())

    def known(self, condition) -> Q:
        return _false_if_null(condition)


KEYS: dict[str, Key] = {
    **{name: StringKey(name) for name in ("id", "task", "content", "owner", "message_id")},
    "status": StringKey("status", choices=tuple(KnowledgeStatus.values)),
    "types": ListKey("types", choices=tuple(KNOWLEDGE_TYPES)),
    "scopes": ListKey("scopes"),
    **{name: NumberKey(name, type_name="integer", bounds=_range_of(name)) for name in ("score", "helpful", "harmful")},
    "confidence": NumberKey("confidence", real=True),
    "quality_score": NumberKey("quality_score", type_name="integer", expression=QUALITY_SCORE,
                               bounds=_range_of(db_type="integer")),  # computed as an integer
    "created_at": DateKey("created_at"),
    "updated_at": DateKey("updated_at"),
    **{f"source.{name}": JsonStringKey(f"source.{name}", column="source", member=name) for name in SOURCE_STRING_KEYS},
    "source.timestamp": SourceTimestampKey("source.timestamp"),
    "source.urls": UrlsKey("source.urls"),
}


def resolve_key(key: Any) -> Key:
    if not isinstance(key, str):
        raise FilterError(_("a filter key is a string, not %(kind)s") % {"kind": _kind(key)})
    if key in KEYS:
        return KEYS[key]
    if key.startswith("tags."):
        name = key.removeprefix("tags.")
        if not TAG_NAME.fullmatch(name):
            raise FilterError(_("invalid tag name %(name)s: use 1-100 of A-Z a-z 0-9 _ . -") % {
                "name": f"{name!r:.120}"})
        return JsonStringKey(key, column="tags", member=name)
    raise FilterError(_("unknown filter key %(key)s; valid keys: %(valid)s, tags.<name>") % {
        "key": f"{key!r:.120}", "valid": ", ".join(KEYS)})
