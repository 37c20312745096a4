from django import forms
from django.contrib import admin, messages
from django.utils.translation import gettext as _

from agents.models import AgentToken, AuditEvent
from agents.services import agent_token_create
from core.admin_tools import AppendOnlyAdmin, SafeJSONField
from agents.static_filters import check_static_filters
from core.errors import DomainError


class AgentTokenForm(forms.ModelForm):
    class Meta:
        model = AgentToken
        fields = ["agent_id", "name", "readable_scopes", "writable_scopes", "can_read_secrets", "can_curate", "static_filters", "is_active"]
        field_classes = {"static_filters": SafeJSONField}  # a lone surrogate shown again safely, not a 500

    def clean_static_filters(self):
        value = self.cleaned_data.get("static_filters")
        if value:
            try:
                check_static_filters(value)
            except DomainError as exc:
                raise forms.ValidationError(exc.message) from exc
        return value or None


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    form = AgentTokenForm
    list_display = ["agent_id", "name", "key_prefix", "readable_scopes", "writable_scopes", "can_read_secrets", "can_curate", "is_active", "last_used_at"]
    list_filter = ["is_active", "can_read_secrets"]
    search_fields = ["agent_id", "name", "key_prefix"]
    readonly_fields = ["key_prefix", "created_at", "last_used_at"]

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        token, raw_key = agent_token_create(
            agent_id=obj.agent_id, name=obj.name, readable_scopes=obj.readable_scopes, writable_scopes=obj.writable_scopes,
            can_read_secrets=obj.can_read_secrets, can_curate=obj.can_curate, static_filters=obj.static_filters,
        )
        obj.pk, obj.key_prefix, obj.key_hash, obj.created_at = token.pk, token.key_prefix, token.key_hash, token.created_at
        messages.warning(request, _("Token for agent:%(agent)s: %(key)s — copy it now, it is not shown again.")
                         % {"agent": token.agent_id, "key": raw_key})


@admin.register(AuditEvent)
class AuditEventAdmin(AppendOnlyAdmin):
    list_display = ["at", "principal", "operation", "target"]
    list_filter = ["operation"]
    search_fields = ["principal", "target"]
    readonly_fields = ["at", "principal", "operation", "target", "args"]

