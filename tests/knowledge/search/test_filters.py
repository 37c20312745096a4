"""Filter expressions against the real database: every operator on every kind of key."""
import json
from datetime import UTC, datetime

import pytest

from knowledge.models import KNOWLEDGE_TYPES, Knowledge
from knowledge.search.filters import (
    AND, CONTAINS, EQ, GT, GTE, IN, LT, LTE, MAX_CONDITIONS, MAX_DEPTH, NEQ, NIN, NOT, OR, STARTSWITH,
    VALID_OPERATORS, FilterError, apply_filter, compile_filter, describe, parse_filter, valid_filter_keys,
)
from tests.factories import make_knowledge

pytestmark = pytest.mark.django_db

INJECTION = "O'Brien'; DROP TABLE knowledge_knowledge; --"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# Five items, labelled A-E; quality_score = score + helpful - 2 * harmful is A 9, B 2, C -1, D 1, E 4.
ITEMS = {
    "A": dict(
        task="Log in to the staging site", content="Use the TEST account; sessions last two hours.",
        types=["strategy", "tool"], scopes=["org:acme", "user:alice"], owner="agent:research_agent",
        message_id="msg-1", tags={"domain": "coding_style", "category": "preference", "priority": "5"},
        source={"name": "Wiki", "category": "exp", "agent_id": "research_agent", "message_id": "msg-1",
                "submitted_by": "alice@example.com", "timestamp": "2026-03-05T12:00:00Z",
                "urls": ["https://example.com/a", "https://docs.example.com/x"]},
        score=4, helpful=5, harmful=0, confidence=0.9, created_at=at("2026-03-05T12:00:00"),
    ),
    "B": dict(
        task="Deploy the billing service", content="Run the migration first.",
        types=["tool"], scopes=["org:acme"], owner="agent:writer", message_id="msg-2",
        tags={"domain": "testing", "priority": "10"},
        source={"name": "Runbook", "category": "doc", "agent_id": "writer",
                "timestamp": "2026-03-01T08:00:00+00:00", "urls": ["http://other.org/runbook"]},
        score=3, helpful=1, harmful=1, confidence=0.5, created_at=at("2026-03-01T08:00:00"),
    ),
    "C": dict(
        task="Plan the quarterly review", content="Collect metrics from the dashboard",
        types=["plan"], scopes=["user:bob"], owner="user:bob",
        tags={"domain": "coding_style-python", "priority": "high"},
        source={"timestamp": "not a date", "urls": []},
        score=5, helpful=0, harmful=3, confidence=0.2, created_at=at("2026-02-20T10:00:00"),
    ),
    "D": dict(
        task="What is a knowledge item", content="A unit of what agents learn.",
        types=["definition", "usecase"], scopes=["org:other"], owner="agent:research_agent", tags={},
        # An impossible date and a url that is not a list: filters must skip them, not fail.
        source={"name": INJECTION, "timestamp": "2026-02-30T00:00:00Z", "urls": "https://not-a-list.example"},
        score=1, helpful=0, harmful=0, confidence=1.0, created_at=at("2026-03-05T23:59:59"),
    ),
    "E": dict(
        task="Prefer tabs", content="50% of users prefer_tabs",
        types=["user_profile"], scopes=["org:acme-labs"], owner="agent:writer",
        tags={"priority": "2.5", "note": "50% off_sale", "123": "digits", "a__b": "dunder"},
        source={"timestamp": "2026-03-06"},
        score=2, helpful=2, harmful=0, confidence=0.0, created_at=at("2026-03-06T00:00:00"),
        updated_at=at("2026-03-07T00:00:00"),
    ),
}


@pytest.fixture
def items() -> dict[str, str]:
    """label -> id"""
    ids = {label: make_knowledge(**fields).id for label, fields in ITEMS.items()}
    Knowledge.objects.filter(pk=ids["C"]).update(status=Knowledge.Status.ARCHIVED)
    return ids


def matching(items: dict[str, str], expr) -> str:
    found = set(apply_filter(Knowledge.objects.all(), expr).values_list("id", flat=True))
    return "".join(sorted(label for label, item_id in items.items() if item_id in found))


CASES = [
    # strings
    (EQ("owner", "agent:writer"), "BE"),
    (NEQ("owner", "agent:writer"), "ACD"),
    (IN("owner", ["agent:writer", "user:bob"]), "BCE"),
    (NIN("owner", ["agent:writer", "user:bob"]), "AD"),
    (CONTAINS("task", "THE"), "ABC"),
    (CONTAINS("content", "50%"), "E"),
    (CONTAINS("content", "_"), "E"),
    (STARTSWITH("owner", "agent:"), "ABDE"),
    (STARTSWITH("owner", "Agent:"), ""),
    (GT("id", "knowledge-20260305"), "ADE"),
    (LT("id", "knowledge-20260302"), "BC"),
    (GTE("owner", "user:bob"), "C"),
    (LTE("owner", "agent:writer"), "ABDE"),
    (EQ("message_id", "msg-1"), "A"),
    (EQ("message_id", ""), "CDE"),
    (EQ("status", "archived"), "C"),
    (NEQ("status", "archived"), "ABDE"),
    (IN("status", ["archived", "merged"]), "C"),
    (IN("owner", []), ""),
    (NIN("owner", []), "ABCDE"),
    # string lists
    (EQ("types", "tool"), "AB"),
    (NEQ("types", "tool"), "CDE"),
    (IN("types", ["plan", "usecase"]), "CD"),
    (NIN("types", ["plan", "usecase"]), "ABE"),
    (CONTAINS("types", ["strategy", "tool"]), "A"),
    (CONTAINS("types", "tool"), "AB"),
    (STARTSWITH("types", "use"), "DE"),
    (EQ("scopes", "org:acme"), "AB"),
    (CONTAINS("scopes", ["org:acme", "user:alice"]), "A"),
    (NIN("scopes", ["org:acme"]), "CDE"),
    (STARTSWITH("scopes", "org:"), "ABDE"),
    (STARTSWITH("scopes", "org:acme"), "ABE"),
    (STARTSWITH("scopes", "%"), ""),
    # numbers
    (EQ("score", 4), "A"),
    (NEQ("score", 4), "BCDE"),
    (GT("score", 3), "AC"),
    (GTE("score", 3), "ABC"),
    (LT("score", 3), "DE"),
    (LTE("score", 3), "BDE"),
    (GT("score", 3.5), "AC"),
    (GTE("score", 3.5), "AC"),
    (LTE("score", "3.5"), "BDE"),
    (EQ("score", 3.5), ""),
    (IN("score", [1, "5"]), "CD"),
    (NIN("score", [1, 5]), "ABE"),
    (GT("helpful", 1), "AE"),
    (EQ("harmful", 0), "ADE"),
    (GTE("confidence", 0.9), "AD"),
    (LT("confidence", 0.5), "CE"),
    (EQ("confidence", 0.5), "B"),
    (EQ("confidence", 0), "E"),
    # quality_score = score + helpful - 2 * harmful
    (GT("quality_score", 3), "AE"),
    (LTE("quality_score", 1), "CD"),
    (EQ("quality_score", 2), "B"),
    (IN("quality_score", [9, -1]), "AC"),
    (LT("quality_score", 0), "C"),
    (NEQ("quality_score", 9), "BCDE"),
    (GTE("quality_score", "4"), "AE"),
    # dates: a plain date is the whole UTC day
    (EQ("created_at", "2026-03-05"), "AD"),
    (NEQ("created_at", "2026-03-05"), "BCE"),
    (GT("created_at", "2026-03-05"), "E"),
    (GTE("created_at", "2026-03-05"), "ADE"),
    (LT("created_at", "2026-03-05"), "BC"),
    (LTE("created_at", "2026-03-05"), "ABCD"),
    (EQ("created_at", "2026-03-05T12:00:00Z"), "A"),
    (GT("created_at", "2026-03-05T12:00:00Z"), "DE"),
    (GT("created_at", "2026-03-05T14:00:00+02:00"), "DE"),
    (LT("created_at", "2026-03-01T08:00:00"), "C"),
    (GTE("created_at", 1772712000), "ADE"),
    (IN("created_at", ["2026-03-01", "2026-02-20"]), "BC"),
    (NIN("created_at", ["2026-03-01", "2026-02-20"]), "ADE"),
    (GT("updated_at", "2026-03-06"), "E"),
    (GT("created_at", datetime(2026, 3, 5, 12, tzinfo=UTC)), "DE"),
    # source.timestamp: unreadable values ("not a date", Feb 30) never match
    (GT("source.timestamp", "2026-03-02"), "AE"),
    (LT("source.timestamp", "2026-03-02"), "B"),
    (EQ("source.timestamp", "2026-03-05"), "A"),
    (NEQ("source.timestamp", "2026-03-05"), "BCDE"),
    (GTE("source.timestamp", "2026-03-06T00:00:00Z"), "E"),
    (LTE("source.timestamp", "2026-03-06"), "ABE"),
    (IN("source.timestamp", ["2026-03-01", "2026-03-06"]), "BE"),
    # tags: NEQ / NIN match items lacking the tag
    (EQ("tags.domain", "coding_style"), "A"),
    (NEQ("tags.domain", "coding_style"), "BCDE"),
    (IN("tags.domain", ["coding_style", "testing"]), "AB"),
    (NIN("tags.domain", ["coding_style", "testing"]), "CDE"),
    (CONTAINS("tags.domain", "CODING"), "AC"),
    (STARTSWITH("tags.domain", "coding_style"), "AC"),
    (EQ("tags.missing", "x"), ""),
    (NEQ("tags.missing", "x"), "ABCDE"),
    (EQ("tags.123", "digits"), "E"),
    (EQ("tags.a__b", "dunder"), "E"),
    (CONTAINS("tags.note", "50%"), "E"),
    (CONTAINS("tags.note", "x%"), ""),
    # tags compared with a number: numerically, skipping "high" rather than failing on it
    (GT("tags.priority", 3), "AB"),
    (LTE("tags.priority", 5), "AE"),
    (GTE("tags.priority", 2.5), "ABE"),
    (LT("tags.priority", 2.5), ""),
    (EQ("tags.priority", 10), "B"),
    (EQ("tags.priority", 5.0), "A"),
    (NEQ("tags.priority", 5), "BCDE"),
    (IN("tags.priority", [10, "high"]), "BC"),
    (NIN("tags.priority", [10, "high"]), "ADE"),
    # ... and with a string: as text, byte order
    (GT("tags.priority", "3"), "AC"),
    (LT("tags.domain", "d"), "AC"),
    # source strings
    (EQ("source.category", "doc"), "B"),
    (NEQ("source.category", "exp"), "B"),
    (IN("source.agent_id", ["research_agent", "writer"]), "AB"),
    (NIN("source.agent_id", ["research_agent"]), "BCDE"),
    (CONTAINS("source.submitted_by", "EXAMPLE.com"), "A"),
    (STARTSWITH("source.name", "O'Brien'"), "D"),
    (GT("source.name", "Runbook"), "A"),
    (GTE("source.name", "Runbook"), "AB"),
    (LT("source.name", "P"), "CDE"),
    (LTE("source.name", ""), "CE"),
    (EQ("source.message_id", "msg-1"), "A"),
    # source.urls, a JSON list
    (EQ("source.urls", "https://example.com/a"), "A"),
    (NEQ("source.urls", "https://example.com/a"), "BCDE"),
    (CONTAINS("source.urls", "https://example.com/a"), "A"),
    (CONTAINS("source.urls", ["https://example.com/a", "https://docs.example.com/x"]), "A"),
    (CONTAINS("source.urls", ["https://example.com/a", "http://other.org/runbook"]), ""),
    (IN("source.urls", ["http://other.org/runbook", "https://docs.example.com/x"]), "AB"),
    (NIN("source.urls", ["http://other.org/runbook"]), "ACDE"),
    (STARTSWITH("source.urls", "https://"), "A"),
    (STARTSWITH("source.urls", "http://"), "B"),
]


@pytest.mark.parametrize(("expr", "expected"), CASES, ids=[e.describe() for e, _ in CASES])
def test_operator_matches_exactly_the_expected_items(items, expr, expected):
    assert matching(items, expr) == expected


@pytest.mark.parametrize(("expr", "expected"), CASES, ids=[e.describe() for e, _ in CASES])
def test_negation_matches_exactly_the_other_items(items, expr, expected):
    assert matching(items, ~expr) == "".join(sorted(set("ABCDE") - set(expected)))


COMBINATIONS = [
    (EQ("types", "tool") & GT("score", 3), "A"),
    (EQ("types", "tool") | EQ("types", "plan"), "ABC"),
    (~EQ("types", "tool"), "CDE"),
    (~(EQ("owner", "agent:writer") | LT("score", 2)), "AC"),
    (EQ("owner", "agent:writer") & ~EQ("tags.priority", 10) | EQ("status", "archived"), "CE"),
    (
        {"op": "OR", "conditions": [
            {"op": "AND", "conditions": [
                {"op": "EQ", "key": "tags.domain", "value": "coding_style"},
                {"op": "GTE", "key": "quality_score", "value": 5},
            ]},
            {"op": "NOT", "condition": {"op": "STARTSWITH", "key": "scopes", "value": "org:"}},
        ]},
        "AC",
    ),
    ({"tags.domain": "testing", "types": "tool"}, "B"),
    ({"types": ["plan", "usecase"]}, "CD"),
    ([{"op": "EQ", "key": "types", "value": "tool"}, {"owner": "agent:writer"}], "B"),
    ({"op": "IN", "key": "owner", "value": ["user:bob"]}, "C"),
    ({"op": "NIN", "key": "owner", "values": ["user:bob"]}, "ABDE"),
    ({"op": "IN", "key": "owner", "value": "user:bob"}, "C"),
    ({"op": "eq", "key": "owner", "value": "user:bob"}, "C"),
    ({"op": "NOT", "condition": {"op": "OR", "conditions": []}}, "ABCDE"),
    ({"op": "AND", "conditions": []}, "ABCDE"),
    ({"op": "OR", "conditions": []}, ""),
    ({"op": "NOT", "condition": {"op": "AND", "conditions": []}}, ""),
    (None, "ABCDE"),
    ([], "ABCDE"),
    ({}, "ABCDE"),
]


@pytest.mark.parametrize(("expr", "expected"), COMBINATIONS, ids=[json.dumps(e, default=repr)[:80] for e, _ in COMBINATIONS])
def test_combined_and_json_filters_match_exactly_the_expected_items(items, expr, expected):
    assert matching(items, expr) == expected


@pytest.mark.parametrize(
    "expr",
    [
        EQ("owner", INJECTION),
        STARTSWITH("scopes", "') OR 1=1 --"),
        CONTAINS("task", "%' OR '1'='1"),
        EQ("tags.domain", "x' OR '1'='1"),
        LT("tags.priority", "0' OR 1=1 --"),
        STARTSWITH("source.urls", '") || true || ("'),
        STARTSWITH("types", '" || @ == @ || "'),
        IN("owner", ["x') OR ('1'='1", "'; SELECT pg_sleep(5); --"]),
    ],
    ids=lambda e: e.describe()[:60],
)
def test_sql_looking_values_are_treated_as_data(items, expr):
    assert matching(items, expr) == ""
    assert Knowledge.objects.count() == 5


def test_the_exact_injection_string_matches_the_item_holding_it(items):
    assert matching(items, EQ("source.name", INJECTION)) == "D"


def test_filters_only_narrow_the_given_queryset(items):
    visible = Knowledge.objects.filter(owner="agent:writer")
    found = set(apply_filter(visible, EQ("types", "tool") | NEQ("types", "tool")).values_list("id", flat=True))
    assert found == {items["B"], items["E"]}


def test_compiled_filter_needs_no_annotation_and_keeps_the_model_property(items):
    item = Knowledge.objects.get(compile_filter(GT("quality_score", 8)))
    assert item.id == items["A"] and item.quality_score == 9.0
    subquery = Knowledge.objects.filter(compile_filter(GT("quality_score", 3))).values("pk")
    assert set(Knowledge.objects.filter(pk__in=subquery).values_list("id", flat=True)) == {items["A"], items["E"]}


def test_numeric_tag_comparison_does_not_crash_on_non_numeric_values(items):
    make_knowledge(tags={"priority": "1e999999"})
    make_knowledge(tags={"priority": "NaN"})
    make_knowledge(tags={"priority": "9" * 300})
    make_knowledge(tags={"priority": " 7 "})
    found = apply_filter(Knowledge.objects.all(), GT("tags.priority", 6))
    assert sorted(item.tags["priority"] for item in found) == [" 7 ", "10"]


ROUND_TRIPS = [
    EQ("tags.domain", "coding_style"),
    NEQ("score", 3),
    GT("confidence", 0.5) & LTE("created_at", "2026-03-05"),
    IN("types", ["tool", "plan"]) | NIN("scopes", ["org:acme"]),
    ~CONTAINS("content", "login"),
    STARTSWITH("source.urls", "https://") & NOT(OR(EQ("status", "archived"), GTE("quality_score", 4))),
    AND(),
    OR(),
]


@pytest.mark.parametrize("expr", ROUND_TRIPS, ids=lambda e: e.describe())
def test_to_dict_and_parse_filter_round_trip(expr):
    data = json.loads(json.dumps(expr.to_dict()))
    assert parse_filter(data) == expr
    assert parse_filter(data).to_dict() == data


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # the shapes agno.filters.FilterExpr.to_dict() writes
        ({"op": "EQ", "key": "status", "value": "active"}, EQ("status", "active")),
        ({"op": "IN", "key": "types", "values": ["tool", "plan"]}, IN("types", ["tool", "plan"])),
        ({"op": "AND", "conditions": [{"op": "EQ", "key": "owner", "value": "a"}, {"op": "GT", "key": "score", "value": 3}]},
         AND(EQ("owner", "a"), GT("score", 3))),
        ({"op": "NOT", "condition": {"op": "STARTSWITH", "key": "task", "value": "Agent"}}, NOT(STARTSWITH("task", "Agent"))),
        # aliases
        ({"op": "nin", "key": "types", "value": ["tool"]}, NIN("types", ["tool"])),
        ({"tags.domain": "coding_style", "types": "tool"}, AND(EQ("tags.domain", "coding_style"), EQ("types", "tool"))),
        ({"owner": "a"}, EQ("owner", "a")),
        ([{"owner": "a"}, {"op": "LT", "key": "score", "value": 2}], AND(EQ("owner", "a"), LT("score", 2))),
    ],
)
def test_parse_filter_accepts_agnos_shapes_and_aliases(data, expected):
    assert parse_filter(data) == expected


def test_chained_operators_stay_flat():
    expr = EQ("owner", "a") & EQ("owner", "b") & EQ("owner", "c") & EQ("owner", "d")
    assert expr.to_dict()["op"] == "AND" and len(expr.expressions) == 4


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        (EQ("tags.domain", "coding_style"), "tags.domain = coding_style"),
        (IN("types", ["tool", "plan"]), "types in [tool, plan]"),
        (EQ("owner", "a") & (GT("score", 3) | ~LT("confidence", 0.5)),
         "owner = a AND (score > 3 OR NOT confidence < 0.5)"),
        (NOT(EQ("owner", "a") & EQ("status", "active")), "NOT (owner = a AND status = active)"),
        ({"op": "STARTSWITH", "key": "scopes", "value": "org:"}, "scopes starts with org:"),
    ],
)
def test_describe_reads_like_the_condition(expr, text):
    assert describe(expr) == text


def nested_not(levels: int) -> dict:
    data = {"op": "EQ", "key": "owner", "value": "a"}
    for _ in range(levels - 1):
        data = {"op": "NOT", "condition": data}
    return data


ERRORS = [
    ({"op": "LIKE", "key": "task", "value": "x"}, ["unknown filter operator 'LIKE'", *VALID_OPERATORS]),
    ({"op": 3, "key": "task", "value": "x"}, ["unknown filter operator"]),
    ({"op": "EQ", "key": "colour", "value": "x"}, ["unknown filter key 'colour'", "quality_score", "tags.<name>", "source.urls"]),
    ({"op": "EQ", "key": "tags.bad name", "value": "x"}, ["invalid tag name"]),
    ({"op": "EQ", "key": "tags." + "x" * 101, "value": "x"}, ["invalid tag name"]),
    ({"op": "GT", "key": "types", "value": "tool"}, ["GT", "types", "CONTAINS"]),
    ({"op": "CONTAINS", "key": "score", "value": 3}, ["CONTAINS", "score"]),
    ({"op": "STARTSWITH", "key": "created_at", "value": "2026"}, ["STARTSWITH", "created_at"]),
    ({"op": "LT", "key": "source.urls", "value": "x"}, ["LT", "source.urls"]),
    ({"op": "EQ", "key": "score", "value": "high"}, ["score", "number"]),
    ({"op": "EQ", "key": "score", "value": True}, ["score", "number"]),
    ({"op": "GT", "key": "confidence", "value": "NaN"}, ["confidence", "finite"]),
    # numbers the database cannot take are refused here, naming the key, before any SQL
    ({"op": "GT", "key": "score", "value": "1e999999"}, ["score", "out of range"]),
    ({"op": "GT", "key": "confidence", "value": "1e-999999"}, ["confidence", "out of range"]),
    ({"op": "IN", "key": "quality_score", "values": ["1e200000"]}, ["quality_score", "out of range"]),
    ({"op": "GT", "key": "tags.priority", "value": 10 ** 1001}, ["tags.priority", "out of range"]),
    ({"op": "LT", "key": "score", "value": "1." + "1" * 100}, ["score", "out of range", "100 digits"]),
    ({"op": "GT", "key": "score", "value": 32768}, ["score", "out of range", "-32,768 to 32,767"]),
    ({"op": "LT", "key": "score", "value": "-32769"}, ["score", "out of range"]),
    ({"op": "GT", "key": "helpful", "value": 2 ** 31}, ["helpful", "out of range", "2,147,483,647"]),
    ({"op": "NEQ", "key": "quality_score", "value": -(2 ** 31) - 1}, ["quality_score", "out of range"]),
    ({"op": "GT", "key": "confidence", "value": "1e309"}, ["confidence", "out of range"]),
    ({"op": "GT", "key": "confidence", "value": "1e-320"}, ["confidence", "out of range"]),
    # operators are ASCII: Unicode case mapping makes "ı" an I and "ſ" an S
    ({"op": "ıN", "key": "owner", "values": ["a"]}, ["unknown filter operator"]),
    ({"op": "ſTARTSWITH", "key": "owner", "value": "a"}, ["unknown filter operator"]),
    ({"op": "NOT", "condition": None}, ["NOT", '"condition"', "null"]),
    ({"op": "NOT", "condition": []}, ["NOT", '"condition"', "[]"]),
    ({"op": "NOT", "condition": {}}, ["NOT", '"condition"', "{}"]),
    ({"op": "IN", "key": "score", "values": [1, [2]]}, ["score", "number"]),
    ({"op": "EQ", "key": "owner", "value": 5}, ["owner", "string"]),
    ({"op": "EQ", "key": "tags.domain", "value": ["a"]}, ["tags.domain", "string"]),
    ({"op": "EQ", "key": "tags.domain", "value": None}, ["tags.domain", "string"]),
    ({"op": "CONTAINS", "key": "tags.domain", "value": 5}, ["tags.domain", "string"]),
    ({"op": "EQ", "key": "types", "value": "gossip"}, ["gossip", *KNOWLEDGE_TYPES]),
    ({"op": "CONTAINS", "key": "types", "value": ["tool", "gossip"]}, ["gossip"]),
    ({"op": "EQ", "key": "status", "value": "deleted"}, ["deleted", "archived"]),
    ({"op": "EQ", "key": "created_at", "value": "yesterday"}, ["created_at", "ISO 8601"]),
    ({"op": "GT", "key": "created_at", "value": "2026-02-30"}, ["created_at", "ISO 8601"]),
    ({"op": "LT", "key": "source.timestamp", "value": "2026-13-01T00:00:00Z"}, ["source.timestamp", "ISO 8601"]),
    ({"op": "GT", "key": "updated_at", "value": {"after": 1}}, ["updated_at", "ISO 8601"]),
    ({"op": "IN", "key": "owner", "values": [str(i) for i in range(101)]}, ["at most 100 values"]),
    ({"op": "EQ", "key": "task", "value": "x" * 501}, ["500 characters"]),
    ({"op": "EQ", "key": "owner"}, ['"value"', "missing value"]),
    ({"op": "EQ", "key": "owner", "vaule": "x", "value": "x"}, ["unexpected vaule"]),
    ({"op": "AND", "conditions": {"op": "EQ"}}, ["conditions"]),
    ({"op": "NOT", "conditions": [{"owner": "a"}]}, ['"condition"']),
    ("owner = 'a'", ["a filter is an object"]),
    (42, ["a filter is an object"]),
    ({"op": "EQ", "key": 5, "value": "x"}, ["key is a string"]),
    (nested_not(MAX_DEPTH + 1), [f"deeper than {MAX_DEPTH} levels"]),
    ({"op": "AND", "conditions": [{"owner": str(i)} for i in range(MAX_CONDITIONS + 1)]}, [f"{MAX_CONDITIONS} conditions"]),
    ([{"owner": "a"}, [{"owner": str(i)} for i in range(MAX_CONDITIONS)]], [f"{MAX_CONDITIONS} conditions"]),
    ([{"op": "OR", "conditions": []}] * (MAX_CONDITIONS + 1), [f"{MAX_CONDITIONS} conditions"]),
    ([[{"op": "OR", "conditions": []}] * 30] * 2, [f"{MAX_CONDITIONS} AND/OR/NOT operators"]),
    ({f"tags.t{i}": "x" for i in range(MAX_CONDITIONS + 1)}, [f"{MAX_CONDITIONS} conditions"]),
]


@pytest.mark.parametrize(("data", "fragments"), ERRORS, ids=[json.dumps(d)[:70] for d, _ in ERRORS])
def test_bad_filters_raise_filter_error_saying_what_is_wrong(data, fragments):
    with pytest.raises(FilterError) as caught:
        compile_filter(data)
    assert caught.value.field == "filters"
    assert isinstance(caught.value, ValueError)
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_nesting_at_the_depth_cap_is_accepted():
    assert parse_filter(nested_not(MAX_DEPTH)).describe().startswith("NOT NOT")


def test_deep_trees_built_in_python_are_refused_too():
    expr = EQ("owner", "a")
    for _ in range(MAX_DEPTH):
        expr = NOT(expr)
    with pytest.raises(FilterError, match="deeper than"):
        compile_filter(expr)


def test_the_condition_cap_is_inclusive():
    assert len(parse_filter([{"owner": str(i)} for i in range(MAX_CONDITIONS)]).expressions) == MAX_CONDITIONS


def test_wide_trees_built_in_python_are_refused_too():
    with pytest.raises(FilterError, match=f"{MAX_CONDITIONS} conditions"):
        compile_filter(AND(*(EQ("owner", str(i)) for i in range(MAX_CONDITIONS + 1))))


def test_agno_style_objects_with_to_dict_are_accepted():
    class AgnoEQ:  # what agno.filters.EQ looks like from here
        def to_dict(self):
            return {"op": "EQ", "key": "tags.domain", "value": "coding_style"}

    assert parse_filter(AgnoEQ()) == EQ("tags.domain", "coding_style")
    assert parse_filter([AgnoEQ(), {"types": "tool"}]) == AND(EQ("tags.domain", "coding_style"), EQ("types", "tool"))


def test_python_constructors_check_key_operator_and_value():
    with pytest.raises(FilterError, match="unknown filter key"):
        EQ("nope", 1)
    with pytest.raises(FilterError, match="GT does not apply to key scopes"):
        GT("scopes", "org:a")
    with pytest.raises(FilterError, match="combines filter expressions"):
        AND(EQ("owner", "a"), {"owner": "b"})


def test_valid_filter_keys_lists_keys_types_operators_and_samples(items):
    keys = valid_filter_keys()
    assert keys["tags.domain"] == {
        "type": "string",
        "operators": ["EQ", "NEQ", "GT", "GTE", "LT", "LTE", "IN", "NIN", "CONTAINS", "STARTSWITH"],
        "samples": ["coding_style", "coding_style-python", "testing"],
    }
    assert {"tags.priority", "tags.category", "tags.note", "tags.123", "tags.a__b"} <= set(keys)
    assert keys["types"]["type"] == "string_list" and "GT" not in keys["types"]["operators"]
    assert keys["types"]["samples"] == ["definition", "plan", "strategy", "tool", "usecase"]
    assert keys["types"]["values"] == KNOWLEDGE_TYPES
    assert keys["status"]["samples"] == ["active", "archived"]
    assert keys["quality_score"]["samples"] == [9, 4, 2, 1, -1]
    assert keys["score"]["operators"] == ["EQ", "NEQ", "GT", "GTE", "LT", "LTE", "IN", "NIN"]
    assert keys["created_at"]["samples"][0] == "2026-03-06T00:00:00Z"
    assert keys["source.urls"]["samples"] == ["http://other.org/runbook", "https://docs.example.com/x",
                                              "https://example.com/a"]
    assert keys["source.category"]["samples"] == ["doc", "exp"]
    assert keys["message_id"]["samples"] == ["msg-1", "msg-2"]
    assert keys["content"]["samples"] == []


def test_valid_filter_keys_samples_only_the_given_queryset_and_respects_sample_size(items, django_assert_max_num_queries):
    with django_assert_max_num_queries(20):
        keys = valid_filter_keys(Knowledge.objects.filter(owner="agent:writer"), sample_size=1)
    assert keys["tags.priority"]["samples"] == ["10"]
    assert "tags.category" not in keys and "tags.note" in keys
    assert keys["owner"]["samples"] == ["agent:writer"]
    assert all(len(info["samples"]) <= 1 for info in keys.values())


def test_every_key_in_valid_filter_keys_can_be_used_with_every_listed_operator(items):
    for key, info in valid_filter_keys().items():
        for op in info["operators"]:
            sample = info["samples"][0] if info["samples"] else "x"
            if info["type"] in ("integer", "number"):
                sample = info["samples"][0] if info["samples"] else 1
            elif info["type"] == "datetime":  # stored source timestamps may be unreadable
                sample = "2026-03-05"
            value = [sample] if op in ("IN", "NIN") else sample
            if op in ("CONTAINS", "STARTSWITH") and not isinstance(value, str):
                value = str(value)
            data = {"op": op, "key": key, "values" if op in ("IN", "NIN") else "value": value}
            list(apply_filter(Knowledge.objects.all(), data).values_list("id", flat=True))


EDGES = [  # the furthest values each kind of number takes: accepted, and the database runs them
    (GT("score", 32767), ""), (LT("score", -32768), ""), (GTE("helpful", 2 ** 31 - 1), ""),
    (GT("quality_score", -(2 ** 31)), "ABCDE"), (LT("confidence", "1e308"), "ABCDE"),
    (GT("confidence", "2.2250738585072014e-308"), "ABCD"), (GT("score", "1e-1000"), "ABCDE"),
    (GT("tags.priority", 10 ** 1000), ""), (LT("tags.priority", -(10 ** 1000)), ""), (EQ("score", "0e-999999"), ""),
    (LT("tags.priority", 10 ** 99), "ABE"),
]


@pytest.mark.parametrize(("expr", "expected"), EDGES, ids=lambda e: e.describe()[:60] if hasattr(e, "describe") else e)
def test_numbers_at_the_edge_of_what_a_key_holds_run(items, expr, expected):
    assert matching(items, expr) == expected
