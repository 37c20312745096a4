"""The API's JSON parser: refuses what the database or the stack cannot take, naming where it is.

A body nested deeper than `safe_json.MAX_DEPTH` levels, or with a NUL character or a
lone surrogate in any key or string, is a 400 whose `fields` name the path
(`metadata.a.b`, `feedback_list.1.knowledge_id`), before any view or filter runs. So is an
object holding one key twice (`{"q": "x", "q": "y"}` ran with the last), naming the key.
"""
import codecs
import json
import re

from django.utils.translation import gettext as _
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.utils import json as drf_json

from core.safe_json import MAX_DEPTH, json_problem, storable

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_CLOSERS = {"{": "}", "[": "]"}


def refuse_unsafe(value, *, path: str = "") -> None:
    """Raise a ValidationError naming the first unsafe place in `value`."""
    found = json_problem(value, path=path)
    if found:
        where, problem = found
        raise ValidationError({where: [problem]})


class _KeyTwice(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _object(pairs: list) -> dict:
    """A JSON object, refused when it holds a key twice (Python's decoder keeps the last without a word)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen = set()
        raise _KeyTwice(next(key for key, _value in pairs if key in seen or seen.add(key)))
    return value


class SafeJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = self._load(stream, parser_context or {})
        except _KeyTwice as exc:
            raise ValidationError({storable(exc.key): [_("given more than once")]}) from None
        except ValueError as exc:  # DRF's words, in the request's language
            raise ParseError(_("JSON parse error - %(problem)s") % {"problem": str(exc)}) from None
        except RecursionError:  # deeper than the decoder can go: far deeper than MAX_DEPTH
            stream_text = parser_context.get("request").body.decode(errors="replace") if parser_context else ""
            refuse_unsafe(_cut_below_the_limit(stream_text))
            too_deep = _("nests deeper than %(depth)s levels") % {"depth": MAX_DEPTH}
            raise ValidationError({"non_field_errors": [too_deep]}) from None
        refuse_unsafe(data)
        return data

    def _load(self, stream, parser_context: dict):
        """DRF's JSONParser.parse, with the hook that refuses a key given twice."""
        decoded = codecs.getreader(get_encoding(parser_context))(stream)
        return drf_json.load(decoded, parse_constant=drf_json.strict_constant if self.strict else None,
                             object_pairs_hook=_object)


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


class NamedContentNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, less a body whose Content-Type is a wildcard (`*/*`, `application/*`): DRF matched it to the
    first parser, so a body that named no type was read as JSON; now 415, as for any other type the view does not
    read."""

    def select_parser(self, request, parsers):
        if "*" in (request.content_type or "").split(";", 1)[0]:
            return None  # DRF's UnsupportedMediaType: 415 naming the type
        return super().select_parser(request, parsers)
