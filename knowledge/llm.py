"""The one way KnowHub talks to an LLM: any OpenAI-compatible endpoint.

Configured by OPENAI_API_KEY, OPENAI_BASE_URL and KNOWHUB_LLM_MODEL. Replies
are requested as structured output (a JSON schema in `response_format`) and
validated against that schema before anyone uses them.
"""
import json

import jsonschema
from django.conf import settings
from django.utils.translation import gettext as _

from core import metrics
from core.safe_json import json_problem, storable
from core.errors import DomainError


class LLMError(RuntimeError):
    """The LLM could not give a usable answer (down, timed out, malformed reply)."""


class LLMNotConfigured(LLMError, DomainError):
    """No LLM is set up: a 409 that says how to configure one."""

    status = 409
    code = "llm_not_configured"

    def __init__(self):
        DomainError.__init__(  # RuntimeError's __init__ would not set the DomainError attributes
            # gettext, not gettext_lazy: in the language of the request that raised it, as a plain str (the MCP
            # server's json.dumps takes no lazy text), as the other typed errors (knowledge.errors) do
            self, _("no LLM is configured: set KNOWHUB_LLM_MODEL and OPENAI_API_KEY "
                    "(and OPENAI_BASE_URL for an OpenAI-compatible endpoint other than OpenAI's)")
        )


def llm_configured() -> bool:
    return bool(settings.KNOWHUB_LLM_MODEL and (settings.OPENAI_API_KEY or settings.OPENAI_BASE_URL))


def _client(timeout: float):
    from openai import OpenAI

    return OpenAI(
        api_key=settings.OPENAI_API_KEY or "unset",
        base_url=settings.OPENAI_BASE_URL or None,
        timeout=timeout,
        max_retries=0,  # retries belong to the caller (a Celery task's backoff, or none in a request)
    )


def chat_json(
    *, system: str, user: str, schema: dict, schema_name: str, model: str | None = None,
    timeout: float | None = None, secrets: list[str] | None = None,
) -> dict:
    """Ask for a JSON object matching `schema`; raise LLMError unless the reply does.

    The call runs through the pre_chat / post_chat filter chain; `secrets`
    (e.g. linked resources' secure bodies) are redacted from every message
    by the built-in filter before anything leaves this process.
    """
    from openai import OpenAIError

    from agents.chain import ChainError, chat

    if not llm_configured():
        raise LLMNotConfigured()

    def send(messages):
        try:
            return _client(timeout or settings.KNOWHUB_LLM_TIMEOUT_SECONDS).chat.completions.create(
                model=model or settings.KNOWHUB_LLM_MODEL,
                messages=messages,
                response_format={"type": "json_schema", "json_schema": {"name": schema_name, "schema": schema, "strict": True}},
            )
        except (OpenAIError, ValueError) as exc:  # ValueError: an HTTP 200 whose body is not JSON (a proxy's page)
            raise LLMError(f"LLM request failed: {type(exc).__name__}: {exc}") from exc

    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    outcome = "error"  # request failed or refused; "invalid": a reply that did not match the schema
    try:
        with metrics.timed(metrics.LLM_SECONDS, purpose=schema_name):
            try:
                response = chat(messages, {"secrets": [s for s in (secrets or []) if s]}, send)
            except ChainError as exc:
                raise LLMError(f"LLM call refused by filter {exc.error.filter}: {exc.error.reason}") from exc
        _count_tokens(schema_name, getattr(response, "usage", None))
        outcome = "invalid"
        data = _judged(response, schema, schema_name)
        outcome = "ok"
        # A NUL or a lone surrogate (JSON's `\u0000`, `\ud800`) is valid JSON that PostgreSQL cannot store: every
        # caller would fail writing it (a job left running, a slim run or conflict detection stopped halfway)
        return storable(data)
    finally:
        metrics.LLM_CALLS.labels(purpose=schema_name, outcome=outcome).inc()


def _judged(response, schema: dict, schema_name: str) -> dict:
    """The reply's JSON if it matches `schema`, else LLMError. Whatever goes wrong judging a reply (one nested past
    Python's recursion limit, an error whose text cannot be formatted) is an LLMError too, never a crash: every
    caller handles an LLMError (a job fails saying why, slim holds the pair back, conflicts record a `close` pair)."""
    try:
        text = response.choices[0].message.content or ""
        data = json.loads(text)
        # bounded first: jsonschema and the text of its errors recurse through the instance, and a reply ~500
        # levels deep raised RecursionError while an error was formatted, past this except
        deep = json_problem(data, path="reply", characters=False)
        if deep is not None:
            raise LLMError(f"LLM reply did not match the {schema_name} schema: {deep[0][:200]} {deep[1]}")
        jsonschema.validate(data, schema)
        return data
    except LLMError:
        raise
    except Exception as exc:  # noqa: BLE001 - an outside service's reply: any failure to judge it is its fault
        try:
            detail = str(exc)[:300]
        except Exception:  # noqa: BLE001 - formatting the error failed too; chain nothing that would fail again
            raise LLMError(f"LLM reply did not match the {schema_name} schema: {type(exc).__name__}") from None
        raise LLMError(f"LLM reply did not match the {schema_name} schema: {detail}") from exc


def _count_tokens(purpose: str, usage) -> None:
    """The reply's prompt and completion tokens (an endpoint that reports no usage counts none)."""
    for kind in ("prompt", "completion"):
        used = getattr(usage, f"{kind}_tokens", None)
        if isinstance(used, int) and used > 0:
            metrics.LLM_TOKENS.labels(purpose=purpose, kind=kind).inc(used)
