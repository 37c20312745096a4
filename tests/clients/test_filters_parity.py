"""The client's filter objects write exactly the JSON the server's own objects write, and the server parses it."""
from datetime import date

import pytest

import knowhub_client.filters as client
from knowledge.search import filters as server


def both(build):
    return build(client), build(server)


CASES = {
    "eq tag": lambda f: f.EQ("tags.domain", "coding_style"),
    "neq": lambda f: f.NEQ("owner", "agent:x"),
    "gt/gte/lt/lte": lambda f: f.GT("score", 2) & f.GTE("helpful", 1) & f.LT("harmful", 3) & f.LTE("confidence", 0.9),
    "in/nin": lambda f: f.IN("types", ["tool", "plan"]) | f.NIN("scopes", ("org:a",)),
    "in single value": lambda f: f.IN("types", "tool"),
    "contains/startswith": lambda f: f.CONTAINS("task", "login") & f.STARTSWITH("source.urls", "https://"),
    "not": lambda f: ~f.EQ("status", "archived"),
    "flattened and": lambda f: f.EQ("types", "tool") & f.EQ("score", 4) & f.EQ("tags.a", "b"),
    "nested": lambda f: (f.EQ("types", "tool") | f.EQ("types", "plan")) & ~f.IN("tags.domain", ["ads"]),
    "explicit groups": lambda f: f.AND(f.OR(f.EQ("score", 5)), f.NOT(f.EQ("owner", "x"))),
    "dates": lambda f: f.GTE("created_at", date(2026, 3, 5)),
}


@pytest.mark.parametrize("build", CASES.values(), ids=CASES.keys())
def test_client_json_equals_server_json_and_parses_back(build):
    ours, theirs = both(build)
    assert ours.to_dict() == theirs.to_dict()
    assert server.parse_filter(ours.to_dict()) == theirs


def test_the_operator_sets_are_the_same():
    assert set(client.OPERATORS) == set(server.VALID_OPERATORS)


def test_agno_filter_objects_pass_through_unchanged():
    from agno.filters import EQ, IN

    assert client.filter_json([EQ("tags.domain", "web"), IN("types", ["tool"])]) == [
        {"op": "EQ", "key": "tags.domain", "value": "web"}, {"op": "IN", "key": "types", "values": ["tool"]}]
    assert server.parse_filter(client.filter_json(EQ("tags.domain", "web") & IN("types", ["tool"]))) == (
        server.EQ("tags.domain", "web") & server.IN("types", ["tool"]))


def test_combining_with_something_else_is_a_type_error():
    with pytest.raises(TypeError):
        client.EQ("types", "tool") & {"op": "EQ"}
    with pytest.raises(TypeError, match="combines filter expressions"):
        client.AND(client.EQ("types", "tool"), "types=tool")
