from django.contrib import admin

from agents.models import AgentToken, AuditEvent


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    list_display = ["agent_id", "name", "key_prefix", "readable_scopes", "writable_scopes", "can_read_secrets", "is_active", "last_used_at"]
    list_filter = ["is_active", "can_read_secrets"]
    search_fields = ["agent_id", "name", "key_prefix"]
    readonly_fields = ["key_prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request):
        return False  # tokens are created with `manage.py create_agent_token`, which shows the key once


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["at", "principal", "operation", "target"]
    list_filter = ["operation"]
    search_fields = ["principal", "target"]
    readonly_fields = ["at", "principal", "operation", "target", "args"]

    # Append-only: nobody edits or deletes the record of what happened.
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
