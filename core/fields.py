"""Serializer fields and rules every app's inputs share: nothing coerced, nothing unknown dropped."""
import copy
import re
from collections.abc import Mapping

from django.http import QueryDict
from django.utils.translation import gettext as _
from rest_framework import serializers
from rest_framework.fields import empty

SCOPE_RE = re.compile(r"^[a-z][a-z0-9_]*:[^\s,]+$")  # kind:name, e.g. org:acme, user:bob
SCOPES_MAX = 50  # scopes in one list a request gives (an item's, a search's or a list's narrowing)


def valid_scopes(value):
    """A serializer's `validate_scopes`: every scope looks like kind:name, else a ValidationError listing the others."""
    bad = [scope for scope in value if not SCOPE_RE.match(scope)]
    if bad:
        raise serializers.ValidationError(_("scopes look like kind:name (org:acme, user:bob); got %(bad)s") % {"bad": bad})
    return value


# Text for a number, where a value comes as text (a query string, a form): ASCII digits only. Python's int() and
# float() would also read "５", "١٠", " 5 " and "5_0"; DRF's IntegerField also "5.0".
ASCII_INTEGER = re.compile(r"-?[0-9]+", re.ASCII)
ASCII_NUMBER = re.compile(r"-?(?:[0-9]+(?:[.][0-9]*)?|[.][0-9]+)(?:[eE][-+]?[0-9]+)?", re.ASCII)

# A serializer's context key saying its data's values are text, as in a query string (a CSV row): numbers come as
# strings there. A query string or a form (a QueryDict) says so by itself.
TEXT_VALUES = "text_values"


def reads_text(field: serializers.Field) -> bool:
    """Whether `field`'s serializer was given text for every value (a QueryDict, or TEXT_VALUES in its context)."""
    root = field.root
    return isinstance(getattr(root, "initial_data", None), QueryDict) or bool(root.context.get(TEXT_VALUES))


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of coercing them.

    `trim_whitespace=False` keeps the text exactly as sent (content, a resource's body and secret, tag values: code
    keeps its indentation, a password its spaces); an all-whitespace value still counts as blank, refused unless
    `allow_blank`. Names and one-line titles (a task, a resource's title) keep DRF's default: trimmed."""

    def run_validation(self, data=empty):
        if not self.trim_whitespace and not self.allow_blank and isinstance(data, str) and data and not data.strip():
            self.fail("blank")
        return super().run_validation(data)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError(_("must be a string"))
        return super().to_internal_value(data)


class StrictRegexField(StrictCharField, serializers.RegexField):
    """A RegexField that refuses numbers and booleans instead of coercing them."""


class _StrictNumber:
    """A JSON number of `json_types` (never a boolean); where values are text (`reads_text`: a query string, a form,
    a CSV row), a string matching `text_pattern`, then read by DRF's own field."""

    text_pattern: re.Pattern
    json_types: tuple

    def to_internal_value(self, data):
        if isinstance(data, str) and reads_text(self):
            if len(data) > self.MAX_STRING_LENGTH:
                self.fail("max_string_length")
            if not self.text_pattern.fullmatch(data):
                self.fail("invalid")
        elif isinstance(data, bool) or not isinstance(data, self.json_types):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(_StrictNumber, serializers.IntegerField):
    """A JSON integer (not 5.0, "5" or true); where values are text, ASCII digits ("5", not "5.0" or "５")."""

    text_pattern, json_types = ASCII_INTEGER, (int,)


class StrictFloatField(_StrictNumber, serializers.FloatField):
    """A JSON number (not "0.5" or true); where values are text, an ASCII decimal ("0.5", "1e-3")."""

    text_pattern, json_types = ASCII_NUMBER, (int, float)


class StrictBooleanField(serializers.BooleanField):
    """true or false; in a query string also 1 or 0. Nothing else is coerced ("yes", "", 2 are refused)."""

    QUERY_VALUES = {"true": True, "false": False, "1": True, "0": False}

    def get_value(self, dictionary):
        if isinstance(dictionary, QueryDict):  # `?reveal=` is a value to refuse, not a missing parameter
            values = dictionary.getlist(self.field_name)
            return values[-1] if values else empty
        return super().get_value(dictionary)

    def to_internal_value(self, data):
        if isinstance(data, bool):
            return data
        if isinstance(data, str) and isinstance(getattr(self.root, "initial_data", None), QueryDict):
            if data in self.QUERY_VALUES:
                return self.QUERY_VALUES[data]
            raise serializers.ValidationError(_("must be true or false (or 1 or 0)"))
        raise serializers.ValidationError(_("must be true or false"))


class ShallowFieldCopies:
    """Serializer mixin: each instance's fields copied in microseconds instead of ~30-80 µs each.

    DRF gives every serializer instance its own deep copy of the declared fields, made by running each field's
    __init__ again: ~0.5 ms for a search's 13 parameters, on every request. A field holding no other field keeps,
    after __init__, only what validation reads and never changes (its arguments, validators, messages), and
    binding it to the instance sets the copy's own attributes, so a shallow copy of the declared field (never bound
    itself) serves as well. A list or dict field's `child` is bound to it: it gets a shallow copy of the child whose
    `parent` is the new field, the one thing binding it again would change. Anything else holding fields (nested
    serializers) is deep-copied, as DRF does. How to copy each field is decided once per serializer class."""

    def get_fields(self):
        plan = _copy_plans.get(type(self))
        if plan is None:
            plan = _copy_plans[type(self)] = {name: _how_to_copy(f) for name, f in self._declared_fields.items()}
        return {name: copy_field(self._declared_fields[name]) for name, copy_field in plan.items()}


_copy_plans: dict[type, dict] = {}


def _fields_held(field) -> list[str]:
    """The attributes of `field` that are fields below it (its `parent`, once bound, is above)."""
    return [name for name, value in vars(field).items() if isinstance(value, serializers.Field) and name != "parent"]


def _how_to_copy(field):
    if isinstance(field, serializers.BaseSerializer):
        return copy.deepcopy
    held = _fields_held(field)
    if not held:
        return _shallow
    if held == ["child"] and not isinstance(field.child, serializers.BaseSerializer) and not _fields_held(field.child):
        return _with_child
    return copy.deepcopy


def _shallow(field):
    copied = object.__new__(type(field))
    copied.__dict__.update(field.__dict__)
    return copied


def _with_child(field):
    copied = _shallow(field)
    copied.child = _shallow(field.child)
    copied.child.parent = copied
    return copied


# Query parameters any GET may carry that are about the transport, not the operation: DRF's format override.
TRANSPORT_PARAMETERS = frozenset({"format"})


class NoUnknownFields(ShallowFieldCopies):
    """Mixin for a Serializer taking a JSON object or a query string: a key it does not declare is a 400 naming that
    key, not silently dropped (a typo such as `socre` or `?topk=3` would otherwise run with the default). Every input
    has it, so every input's fields are copied cheaply (`ShallowFieldCopies`)."""

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            ignored = TRANSPORT_PARAMETERS if isinstance(data, QueryDict) else frozenset()
            unknown = [str(key) for key in data if key not in self.fields and key not in ignored]
            if unknown:
                expected = ", ".join(self.fields)
                raise serializers.ValidationError({key: [_("unknown field; expected one of %(expected)s") % {"expected": expected}] for key in unknown})
            if isinstance(data, QueryDict):  # `?top_k=1&top_k=50` ran with the last one; a list's repeats are its items
                repeated = [key for key in data if len(data.getlist(key)) > 1 and key in self.fields
                            and not isinstance(self.fields[key], serializers.ListField)]
                if repeated:
                    raise serializers.ValidationError({key: [_("given more than once")] for key in repeated})
        return super().to_internal_value(data)
