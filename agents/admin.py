from django.contrib import admin

from agents.models import AgentToken


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    list_display = ["agent_id", "name", "key_prefix", "readable_scopes", "writable_scopes", "can_read_secrets", "is_active", "last_used_at"]
    list_filter = ["is_active", "can_read_secrets"]
    search_fields = ["agent_id", "name", "key_prefix"]
    readonly_fields = ["key_prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request):
        return False  # tokens are created with `manage.py create_agent_token`, which shows the key once
