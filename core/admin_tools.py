from django.contrib import admin


class AppendOnlyAdmin(admin.ModelAdmin):
    """For records that are evidence (audit logs): visible to admins, never added, edited or deleted here."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
