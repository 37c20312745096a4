"""The `Idempotency-Key` header on saves (POST /api/knowledge, /bulk, POST /api/resource) and feedback
(PUT /api/knowledge/{id}, POST /api/knowledge/batch_update), whose retry would otherwise count a case twice."""
import json
from collections.abc import Callable
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from rest_framework.response import Response

from agents.caller import Caller
from agents.idempotency import IdempotencyKeyError, idempotent_reply
from core.errors import error_response

HEADER = "Idempotency-Key"


def idempotent_response(request, caller: Caller, operation: str, run: Callable[[], tuple[int, Any]],
                        about: dict | None = None) -> Response:
    """Run `run` once per (token, key); a repeat gets the stored reply with `Idempotent-Replayed: true`.

    `about` (the path's ids) is part of the request the key stands for: the same body sent with the same key
    to another item is another request (409), not a replay of the first item's reply."""

    def run_as_json() -> tuple[int, Any]:
        status, body = run()
        return status, json.loads(json.dumps(body, cls=DjangoJSONEncoder))

    try:
        token = getattr(request.user, "token", None)  # an agent's token; a person has none
        status, body, replayed = idempotent_reply(principal=caller.principal, key=request.headers.get(HEADER),
                                                  operation=operation, run=run_as_json,
                                                  data=request.data if about is None else {"about": about,
                                                                                           "body": request.data},
                                                  token_id=None if token is None else token.pk)
    except IdempotencyKeyError as exc:
        return error_response(exc.status, "idempotency_key", exc.message, {HEADER: [exc.message]})
    response = Response(body, status=status)
    if replayed:
        response["Idempotent-Replayed"] = "true"
    return response
