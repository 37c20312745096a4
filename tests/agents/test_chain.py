"""The filter chain of seed 004."""
import pytest

from agents.chain import ChainError, Continue, Error, Filter, Skip, chat, invoke, registered_temporarily


def add(a, b, context):
    return a + b


CTX = {"caller": "a test caller"}  # the built-in require_caller filter refuses calls without one


def test_filters_run_in_priority_order_and_may_change_args():
    seen = []

    def record(name, change=None):
        def handler(ctx):
            seen.append(name)
            if change:
                ctx["args"]["a"] = change
            return Continue(ctx)
        return handler

    with registered_temporarily(
        Filter("late", "pre_invocation", record("late"), priority=10),
        Filter("early", "pre_invocation", record("early", change=100), priority=-5),
        Filter("default", "pre_invocation", record("default")),
    ):
        assert invoke("add", add, {"a": 1, "b": 2}, CTX) == 102
    assert seen == ["early", "default", "late"]


def test_skip_short_circuits_with_a_value_and_the_operation_never_runs():
    def never(**kwargs):
        raise AssertionError("ran")

    with registered_temporarily(Filter("cache", "pre_invocation", lambda ctx: Skip("cached"))):
        assert invoke("x", never, {}, CTX) == "cached"


def test_error_stops_the_call_naming_the_filter():
    with registered_temporarily(Filter("quota", "pre_invocation", lambda ctx: Error("over quota", status=429))):
        with pytest.raises(ChainError) as excinfo:
            invoke("add", add, {"a": 1, "b": 2}, CTX)
    assert excinfo.value.error.filter == "quota" and excinfo.value.error.status == 429


def test_an_exception_in_a_handler_becomes_an_error_result():
    def broken(ctx):
        raise KeyError("oops")

    with registered_temporarily(Filter("broken", "pre_invocation", broken)):
        with pytest.raises(ChainError, match="filter broken failed: KeyError"):
            invoke("add", add, {"a": 1, "b": 2}, CTX)


def test_post_filters_may_change_the_result():
    def double(ctx):
        ctx["result"] *= 2
        return Continue(ctx)

    with registered_temporarily(Filter("double", "post_invocation", double)):
        assert invoke("add", add, {"a": 1, "b": 2}, CTX) == 6


def test_chat_filters_wrap_the_llm_call():
    sent = []

    def redact(ctx):
        ctx["messages"] = [{**m, "content": m["content"].replace("hunter2", "[REDACTED]")} for m in ctx["messages"]]
        return Continue(ctx)

    with registered_temporarily(Filter("redact", "pre_chat", redact)):
        reply = chat([{"role": "user", "content": "password hunter2"}], {}, lambda msgs: sent.extend(msgs) or "ok")
    assert reply == "ok" and sent[0]["content"] == "password [REDACTED]"


def test_unknown_filter_type_is_refused():
    with pytest.raises(ValueError, match="pre_invocation"):
        Filter("x", "before", lambda ctx: Continue(ctx))


def test_filters_listed_in_settings_are_applied(settings):
    settings.KNOWHUB_FILTERS = ["tests.agents.test_chain.TRIPLE"]
    assert invoke("add", add, {"a": 1, "b": 2}, CTX) == 9


TRIPLE = Filter("triple", "post_invocation", lambda ctx: Continue({**ctx, "result": ctx["result"] * 3}))


@pytest.mark.django_db
def test_builtin_filters_refuse_a_call_without_a_caller_and_validate_raw_input():
    from agents import operations
    from agents.caller import Caller

    def _search(*, context, **data):
        return operations.get("knowledge_search").handler(context["caller"], **data)

    with pytest.raises(ChainError) as excinfo:
        invoke("knowledge_search", _search, {"data": {"q": "x"}}, {})
    assert excinfo.value.error.status == 401 and excinfo.value.error.filter == "require_caller"

    caller = Caller(principal="agent:a", agent_id="a", readable_scopes=("org:a",), writable_scopes=("org:a",))
    with pytest.raises(ChainError) as excinfo:
        invoke("knowledge_search", _search, {"data": {"q": "x", "top_k": 500}}, {"caller": caller})
    assert excinfo.value.error.status == 400 and "top_k" in excinfo.value.error.fields
    found = invoke("knowledge_search", _search, {"data": {"q": "x"}}, {"caller": caller})
    assert (found["results"], found["count"], len(found["search_id"])) == ([], 0, 36)


def test_a_broken_filter_is_a_503_naming_it_not_a_500():
    def broken(ctx):
        raise RuntimeError("boom")

    with registered_temporarily(Filter("broken", "pre_invocation", broken)):
        with pytest.raises(ChainError) as excinfo:
            invoke("add", add, {"a": 1, "b": 2}, CTX)
    assert excinfo.value.error.status == 503 and excinfo.value.error.filter == "broken"


@pytest.mark.django_db
def test_a_caller_refused_an_operation_is_refused_before_any_filter_answers_for_it():
    """The operation's permission comes first: a deployment filter's Skip (a cache, a canned answer) or an
    input's validation never answers a caller that may not run the operation."""
    from rest_framework.exceptions import PermissionDenied

    from agents import operations
    from agents.caller import Caller

    reader = Caller(principal="agent:r", agent_id="r", readable_scopes=("org:a",), writable_scopes=())
    writer = Caller(principal="agent:w", agent_id="w", readable_scopes=("org:a",), writable_scopes=("org:a",))
    with registered_temporarily(Filter("canned", "pre_invocation", lambda ctx: Skip({"id": "canned"}), priority=-200)):
        with pytest.raises(PermissionDenied):
            operations.call("knowledge_save", reader, data={"task": "t", "content": "c", "types": ["tool"]})
        with pytest.raises(PermissionDenied):
            operations.call("knowledge_save", reader, data={"task": 5})
        assert operations.call("knowledge_save", writer, data={"task": 5}) == {"id": "canned"}
