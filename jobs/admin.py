from django.contrib import admin

from jobs.models import WorkerHeartbeat


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["hostname", "instance", "pid", "started_at", "last_seen"]
    readonly_fields = list_display
