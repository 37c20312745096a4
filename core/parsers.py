"""The API's JSON parser: refuses what the database or the stack cannot take, naming where it is.

A body nested deeper than `safe_json.MAX_DEPTH` levels, or with a NUL character or a
lone surrogate in any key or string, is a 400 whose `fields` name the path
(`metadata.a.b`, `feedback_list.1.knowledge_id`), before any view or filter runs.
"""
import json
import re

from django.utils.translation import gettext as _
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser

from core.safe_json import MAX_DEPTH, json_problem

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_CLOSERS = {"{": "}", "[": "]"}


def refuse_unsafe(value, *, path: str = "") -> None:
    """Raise a ValidationError naming the first unsafe place in `value`."""
    found = json_problem(value, path=path)
    if found:
        where, problem = found
        raise ValidationError({where: [problem]})


class SafeJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except ParseError as exc:  # DRF leaves this one untranslated: the same words, in the request's language
            problem = str(exc.detail).removeprefix("JSON parse error - ")
            raise ParseError(_("JSON parse error - %(problem)s") % {"problem": problem}) from None
        except RecursionError:  # deeper than the decoder can go: far deeper than MAX_DEPTH
            stream_text = parser_context.get("request").body.decode(errors="replace") if parser_context else ""
            refuse_unsafe(_cut_below_the_limit(stream_text))
            too_deep = _("nests deeper than %(depth)s levels") % {"depth": MAX_DEPTH}
            raise ValidationError({"non_field_errors": [too_deep]}) from None
        refuse_unsafe(data)
        return data


def _cut_below_the_limit(text: str):
    """The document up to where it nests one level past MAX_DEPTH, closed there, parsed (None if that fails).

    Lets the depth error name its path (`metadata.a.a…`) when the document is
    too deep for Python's decoder to parse whole.
    """
    openers: list[str] = []
    for token in _TOKENS.finditer(text):
        mark = token.group()
        if mark in _CLOSERS:
            if len(openers) > MAX_DEPTH:
                closed = text[: token.start()] + "0" + "".join(_CLOSERS[o] for o in reversed(openers))
                try:
                    return json.loads(closed)
                except ValueError:
                    return None
            openers.append(mark)
        elif mark in ("}", "]") and openers:
            openers.pop()
    return None
