from django.contrib import admin

from knowhub_site.admin_tools import AppendOnlyAdmin
from resources.models import Resource, ResourceVersion, RevealEvent


@admin.register(Resource)
class ResourceAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "content_type", "has_secret", "owner", "expires_at", "is_expired", "dependent_knowledge", "updated_at"]
    list_filter = ["content_type", "is_expired", ("expires_at", admin.EmptyFieldListFilter)]
    search_fields = ["id", "title", "body"]
    readonly_fields = ["created_at", "updated_at"]
    # The secret is never shown in the admin, only whether there is one.
    exclude = ["secure_body"]

    @admin.display(description="used by")
    def dependent_knowledge(self, obj):
        return obj.knowledge.count()

    @admin.display(boolean=True, description="secret")
    def has_secret(self, obj):
        return obj.has_secret


@admin.register(RevealEvent)
class RevealEventAdmin(AppendOnlyAdmin):
    list_display = ["at", "principal", "resource_id", "remote_addr"]
    search_fields = ["principal", "resource_id"]
    readonly_fields = ["at", "principal", "resource_id", "remote_addr", "user_agent"]

