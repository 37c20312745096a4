"""Log lines: JSON or text, one per request with its request id, agent and operation, and never a secret."""
import json
import logging

import pytest

from core import request_context
from core.logs import JsonFormatter, RequestIdFilter, TextFormatter, logging_config
from knowhub_site import job_observability
from tests.callers import agent_key, client_with

SECRET = "sk-live-0123456789abcdef"


def record(message="hello %s", args=("world",), **extra) -> logging.LogRecord:
    made = logging.LogRecord("knowhub.test", logging.INFO, __file__, 1, message, args, None)
    for key, value in extra.items():
        setattr(made, key, value)
    RequestIdFilter().filter(made)
    return made


def test_a_json_line_carries_time_level_logger_message_the_request_id_and_the_event_fields():
    with request_context.bound(request_context.Context(request_id="req-12345678")):
        line = json.loads(JsonFormatter().format(record(event={"status": 201, "duration_ms": 3.5})))
    assert line["message"] == "hello world" and line["level"] == "INFO" and line["logger"] == "knowhub.test"
    assert line["request_id"] == "req-12345678" and line["status"] == 201 and line["duration_ms"] == 3.5
    assert line["time"].endswith("+00:00")


def test_a_json_line_outside_a_request_has_no_request_id_and_keeps_an_exception_on_one_line():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        made = record(exc_info=sys.exc_info())
    text = JsonFormatter().format(made)
    assert "\n" not in text
    line = json.loads(text)
    assert "request_id" not in line and "ValueError: boom" in line["exception"]


def test_a_text_line_is_readable_with_the_request_id_and_the_event_fields():
    with request_context.bound(request_context.Context(request_id="req-12345678")):
        text = TextFormatter().format(record(event={"status": 201}))
    assert "INFO knowhub.test [req-12345678] hello world status=201" in text


@pytest.mark.parametrize("log_format, formatter", [("json", JsonFormatter), ("text", TextFormatter)])
def test_log_format_chooses_the_console_formatter(log_format, formatter):
    config = logging_config(log_format=log_format, level="INFO")
    assert config["handlers"]["console"]["formatter"] == log_format
    assert config["formatters"][log_format]["()"] == f"core.logs.{formatter.__name__}"


def test_an_unknown_log_format_is_refused():
    with pytest.raises(ValueError, match="LOG_FORMAT"):
        logging_config(log_format="xml", level="INFO")


@pytest.mark.parametrize("incoming, kept", [
    ("client-req-0001", True),
    ("0f8c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b", True),
    ("short", False),  # under 8
    ("x" * 65, False),  # over 64
    ("has space 1234", False),
    ("inject\nline-1234", False),
])
def test_a_sane_incoming_request_id_is_kept_otherwise_a_new_one_is_made(incoming, kept):
    chosen = request_context.request_id_from(incoming)
    assert (chosen == incoming) is kept
    assert request_context.REQUEST_ID_PATTERN.match(chosen)


def request_lines(caplog) -> list[dict]:
    return [r.event for r in caplog.records if r.name == "knowhub.request"]


@pytest.mark.django_db
def test_each_request_logs_one_line_with_route_status_duration_agent_operation_and_the_returned_request_id(caplog):
    agent = client_with(agent_key("log_agent", ("org:acme",)))
    with caplog.at_level(logging.INFO):
        response = agent.get("/api/knowledge/search", {"q": "proxies"}, HTTP_X_REQUEST_ID="client-req-0001")
    assert response["X-Request-ID"] == "client-req-0001"
    [line] = request_lines(caplog)
    assert line["method"] == "GET" and line["route"] == "/api/knowledge/search" and line["status"] == 200
    assert line["agent"] == "log_agent" and line["operation"] == "knowledge_search" and line["entry"] == "rest"
    assert line["duration_ms"] >= 0
    assert line["request_id"] == "client-req-0001"


@pytest.mark.django_db
def test_a_request_without_an_id_gets_a_new_one_in_the_header(client):
    first, second = client.get("/healthz")["X-Request-ID"], client.get("/healthz")["X-Request-ID"]
    assert request_context.REQUEST_ID_PATTERN.match(first) and first != second


@pytest.mark.django_db
def test_a_persons_request_names_the_user_and_a_path_parameter_stays_a_pattern(caplog, curator, client):
    client.force_login(curator)
    with caplog.at_level(logging.INFO):
        client.get("/api/knowledge/knowledge-20990101-none")
    [line] = request_lines(caplog)
    assert line["agent"] == f"user:{curator.pk}" and line["status"] == 404
    assert line["route"] == "/api/knowledge/<segment:knowledge_id>"


@pytest.mark.django_db
def test_no_log_line_of_a_request_holds_its_token_query_string_or_body(caplog):
    key = agent_key("log_agent", ("org:acme",), can_read_secrets=True)
    agent = client_with(key)
    with caplog.at_level(logging.DEBUG):
        agent.post(f"/api/resource?api_key={SECRET}", {"id": "code/login", "title": "login", "body": "print(1)",
                                                        "secure_body": SECRET}, format="json")
        agent.post("/api/knowledge", {"task": f"Use {SECRET}", "content": SECRET, "types": ["tool"]}, format="json")
        agent.get("/api/knowledge/search", {"q": SECRET})
    assert len(request_lines(caplog)) == 3
    formatter = JsonFormatter()
    for made in caplog.records:
        RequestIdFilter().filter(made)
        text = formatter.format(made)
        assert SECRET not in text and key not in text and "api_key" not in text


def test_a_queued_task_carries_the_request_id_in_its_headers():
    headers: dict = {}
    with request_context.bound(request_context.Context(request_id="client-req-0001")):
        job_observability._send_request_id(headers=headers)
    assert headers == {job_observability.HEADER: "client-req-0001"}
    outside: dict = {}
    job_observability._send_request_id(headers=outside)
    assert outside == {}


@pytest.mark.django_db(transaction=True)  # _run_sync closes connections as a request's end would
def test_an_mcp_tool_call_logs_one_line_with_its_operation_agent_status_and_the_callers_request_id(caplog):
    from api.mcp_server import _op, _Refused, _run_sync

    key = agent_key("mcp_agent", ("org:acme",))
    with caplog.at_level(logging.INFO):
        _run_sync(key, _op("knowledge_search", {"q": "proxies"}), "mcp-req-00000001")
        with pytest.raises(_Refused):
            _run_sync(key, _op("knowledge_get", knowledge_id="knowledge-20990101-none"))
    found, missing = request_lines(caplog)
    assert (found["operation"], found["agent"], found["status"], found["entry"]) == ("knowledge_search", "mcp_agent", 200, "mcp")
    assert (missing["operation"], missing["status"]) == ("knowledge_get", 404)
    assert found["request_id"] == "mcp-req-00000001" and missing["request_id"] != found["request_id"]


@pytest.mark.django_db
def test_a_page_refused_to_a_user_without_a_role_is_logged_as_a_warning_without_a_traceback(
        django_user_model, caplog):
    from tests.callers import person_in, session_client

    client = session_client(person_in(django_user_model, None, "no-role"))
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert client.get("/knowledge/").status_code == 403
    (refused,) = [r for r in caplog.records if r.name == "django.request"]
    assert refused.levelno == logging.WARNING and "Forbidden" in refused.getMessage()
    assert refused.exc_info is None and "Traceback" not in caplog.text


def test_a_server_error_is_still_logged_with_its_traceback(caplog):
    logger = logging.getLogger("django.request")
    failure = (RuntimeError, RuntimeError("the page broke"), None)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        for status in (500, 403):
            logger.handle(logger.makeRecord("django.request", logging.ERROR, __file__, 1, "%s: /x", (status,), failure,
                                            extra={"status_code": status}))
    assert [(r.status_code, r.exc_info is not None) for r in caplog.records] == [(500, True), (403, False)]
