"""What an agent may filter on, with sample values, so it can write filters that match."""
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import connections
from django.db.models import F, Func, QuerySet

from knowledge.limits import TAG_NAME
from knowledge.models import Knowledge
from knowledge.search.filters.keys import KEYS, SOURCE_STRING_KEYS, JsonStringKey, Key, ListKey

MAX_TAG_NAMES = 100  # the most used ones
FREE_TEXT_KEYS = ("task", "content")  # no samples: long, and DISTINCT over them scans every row


def valid_filter_keys(queryset: QuerySet | None = None, *, sample_size: int = 5) -> dict[str, dict[str, Any]]:
    """Each key -> {"type", "operators", "samples"} (+ "values" where the values are fixed).

    Samples are up to `sample_size` distinct non-empty values found in `queryset`
    (default: all knowledge). Tag keys are the tag names present there; any other
    `tags.<name>` is valid too and simply matches nothing. Every sample comes from
    SQL (DISTINCT ... LIMIT, or one GROUP BY for tags and source), not a Python scan.
    """
    queryset = (Knowledge.objects.all() if queryset is None else queryset).order_by()
    sample_size = max(0, sample_size)
    tags = _json_samples(queryset, column="tags", sample_size=sample_size)
    source = _json_samples(queryset, column="source", sample_size=sample_size,
                           members=(*SOURCE_STRING_KEYS, "timestamp"))
    keys: dict[str, dict[str, Any]] = {}
    for name, key in KEYS.items():
        if name.startswith("source."):
            member = name.removeprefix("source.")
            samples = _url_samples(queryset, sample_size=sample_size) if member == "urls" else source.get(member, [])
        else:
            samples = _column_samples(queryset, key, sample_size=sample_size)
        keys[name] = _describe_key(key, samples)
    for tag, samples in sorted(tags.items()):
        name = f"tags.{tag}"
        keys[name] = _describe_key(JsonStringKey(name, column="tags", member=tag), samples)
    return keys


def _describe_key(key: Key, samples: list) -> dict[str, Any]:
    info = {"type": key.type_name, "operators": list(key.operators), "samples": [_plain(s) for s in samples]}
    if key.choices:
        info["values"] = list(key.choices)
    return info


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Decimal):
        return float(value)
    return value


def _column_samples(queryset: QuerySet, key: Key, *, sample_size: int) -> list:
    if key.name in FREE_TEXT_KEYS or sample_size == 0:
        return []
    if isinstance(key, ListKey):
        rows, order = queryset.annotate(sample_value=Func(F(key.column), function="unnest")), "sample_value"
    elif key.type_name == "string":
        rows, order = queryset.exclude(**{key.column: ""}).annotate(sample_value=F(key.column)), "sample_value"
    else:  # newest dates, highest numbers first
        rows, order = queryset.annotate(sample_value=key.expression()), "-sample_value"
    return list(rows.values_list("sample_value", flat=True).distinct().order_by(order)[:sample_size])


def _ids_subquery(queryset: QuerySet) -> tuple[str, tuple]:
    return queryset.values("pk").query.get_compiler(using=queryset.db).as_sql()


def _json_samples(queryset: QuerySet, *, column: str, sample_size: int,
                  members: tuple[str, ...] | None = None) -> dict[str, list[str]]:
    """Member name -> sample values of a JSON object column, in one GROUP BY."""
    connection = connections[queryset.db]
    quote = connection.ops.quote_name
    ids_sql, ids_params = _ids_subquery(queryset)
    # the members asked for, else (tags) the names filters can name, before the LIMIT: a name stored before tags were
    # held to that rule is not offered and takes no place of one that is
    only = "AND member.key = ANY(%s)" if members else f"AND member.key ~ '^{TAG_NAME.pattern}$'"
    sql = f"""
        SELECT member.key,
               (array_agg(DISTINCT member.value ORDER BY member.value) FILTER (WHERE member.value <> ''))[1:%s]
        FROM {quote(Knowledge._meta.db_table)} AS item
        CROSS JOIN LATERAL jsonb_each_text(item.{quote(column)}) AS member
        WHERE item.{quote("id")} IN ({ids_sql}) {only}
        GROUP BY member.key
        ORDER BY count(*) DESC, member.key
        LIMIT %s
    """
    params = [sample_size, *ids_params, *([list(members)] if members else []), MAX_TAG_NAMES]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {name: list(values or []) for name, values in cursor.fetchall()}


def _url_samples(queryset: QuerySet, *, sample_size: int) -> list[str]:
    connection = connections[queryset.db]
    quote = connection.ops.quote_name
    ids_sql, ids_params = _ids_subquery(queryset)
    sql = f"""
        SELECT DISTINCT url
        FROM {quote(Knowledge._meta.db_table)} AS item
        CROSS JOIN LATERAL jsonb_array_elements_text(
            CASE WHEN jsonb_typeof(item.source -> 'urls') = 'array' THEN item.source -> 'urls' ELSE '[]' END
        ) AS url
        WHERE item.{quote("id")} IN ({ids_sql}) AND url <> ''
        ORDER BY url
        LIMIT %s
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [*ids_params, sample_size])
        return [row[0] for row in cursor.fetchall()]
