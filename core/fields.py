"""Serializer fields and rules every app's inputs share: nothing coerced, nothing unknown dropped."""
import re
from collections.abc import Mapping

from django.http import QueryDict
from django.utils.translation import gettext as _
from rest_framework import serializers
from rest_framework.fields import empty

SCOPE_RE = re.compile(r"^[a-z][a-z0-9_]*:[^\s,]+$")  # kind:name, e.g. org:acme, user:bob


def valid_scopes(value):
    """A serializer's `validate_scopes`: every scope looks like kind:name, else a ValidationError listing the others."""
    bad = [scope for scope in value if not SCOPE_RE.match(scope)]
    if bad:
        raise serializers.ValidationError(_("scopes look like kind:name (org:acme, user:bob); got %(bad)s") % {"bad": bad})
    return value


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of coercing them."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError(_("must be a string"))
        return super().to_internal_value(data)


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


class NoUnknownFields:
    """Mixin for a Serializer taking a JSON object: a key it does not declare is a 400 naming that key,
    not silently dropped (a typo such as `socre` would otherwise save the default)."""

    def to_internal_value(self, data):
        if isinstance(data, Mapping) and not isinstance(data, QueryDict):
            unknown = [str(key) for key in data if key not in self.fields]
            if unknown:
                expected = ", ".join(self.fields)
                raise serializers.ValidationError({key: [_("unknown field; expected one of %(expected)s") % {"expected": expected}] for key in unknown})
        return super().to_internal_value(data)
