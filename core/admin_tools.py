"""What every admin here shares: append-only evidence, changelists whose URL filters never end in a 500, JSON fields
held to the API's rules for JSON, and the API's refusals shown as form errors."""
import json

from django import forms
from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.db import DataError, transaction
from django.forms.fields import InvalidJSONInput

from core.errors import invalid_fields
from core.safe_json import json_problem


class AppendOnlyAdmin(admin.ModelAdmin):
    """For records that are evidence (audit logs): visible to admins, never added, edited or deleted here."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ChangeListRefusingBadLookups(ChangeList):
    """A changelist whose filters from the URL (`?scopes__contains=x`, `?created_at__year=99999`) are answered as
    Django answers any other invalid lookup, a redirect to `?e=1`, never a 500.

    Django turns errors raised while a filter is *applied* into IncorrectLookupParameters, but a value is only
    refused when the query runs (a malformed array literal, an invalid regular expression: DataError) or is
    compiled (a year out of range: ValueError), and the date hierarchy's own bounds can overflow (year 9999).
    The count that runs first is inside a savepoint, so the refused query leaves any surrounding transaction usable.
    """

    REFUSED = (DataError, ValueError, OverflowError)

    def get_queryset(self, request, exclude_parameters=None):
        try:
            return super().get_queryset(request, exclude_parameters)
        except self.REFUSED as exc:
            raise IncorrectLookupParameters(exc) from exc

    def get_results(self, request):
        try:
            with transaction.atomic():
                super().get_results(request)
        except self.REFUSED as exc:
            raise IncorrectLookupParameters(exc) from exc


class RefusesBadLookups:
    """For a ModelAdmin: URL filters the database refuses are an invalid lookup (above); and none on a secret,
    whose ciphertext's length would tell roughly how long the secret is (DisallowedModelAdminLookup: a 400)."""

    SECRET_FIELDS = {"secure_body"}

    def get_changelist(self, request, **kwargs):
        return ChangeListRefusingBadLookups

    def lookup_allowed(self, lookup, value, request=None):
        if lookup.split("__", 1)[0] in self.SECRET_FIELDS:
            return False
        return super().lookup_allowed(lookup, value, request)


def refuse_bad_lookups_everywhere(site=admin.site) -> None:
    """Every admin registered on `site` (Django's own users and groups too) answers a URL filter the database
    refuses as an invalid lookup: those not built on RefusesBadLookups get its changelist (run once the admins are
    registered, from an AppConfig.ready after django.contrib.admin's)."""
    for model_admin in site._registry.values():
        if not isinstance(model_admin, RefusesBadLookups) and model_admin.get_changelist(None) is ChangeList:
            model_admin.get_changelist = lambda request, **kwargs: ChangeListRefusingBadLookups


class SafeJSONField(forms.JSONField):
    """A form's JSON field refusing what the API's bodies refuse (`json_problem`: a NUL, a lone surrogate, deeper
    than 32 levels; PostgreSQL's jsonb holds neither of the first two), as an error naming the path.

    Django's own field parses `"\\ud800"` and writes the parsed value back into the page it shows the error on, where
    the lone surrogate cannot be encoded (a 500): a value holding one is shown again as the text that was typed."""

    def validate(self, value):
        super().validate(value)
        found = json_problem(value)
        if found:
            where, problem = found
            raise forms.ValidationError(problem if where == "non_field_errors" else f"{where}: {problem}",
                                        code="invalid")

    def bound_data(self, data, initial):
        value = super().bound_data(data, initial)
        if not isinstance(value, InvalidJSONInput) and data is not None and json_problem(value):
            return InvalidJSONInput(data)  # the typed text: only escapes, never the character itself
        return value

    def prepare_value(self, value):
        if not isinstance(value, InvalidJSONInput) and json_problem(value):
            return json.dumps(value, cls=self.encoder)  # ASCII: escapes instead of what no page can hold
        return super().prepare_value(value)


def add_refusals(form, refused) -> None:
    """The API's refusal (a DRF ValidationError) as errors on the form's fields, a nested one's path below its field
    kept (`urls.0: ...`); an error on a field the form lacks goes above the form."""
    for name, detail in refused.detail.items():
        message = invalid_fields({name: detail})[0].removeprefix(f"{name}: ").removeprefix(f"{name}.")
        form.add_error(name if name in form.fields else None, message)
