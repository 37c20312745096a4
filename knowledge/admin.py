"""The Django admin over knowledge: every change goes through the services, and nothing is deleted.

An edit of task, content, tags or types keeps the old text as a version and re-embeds the item
(`services.knowledge_change_fields`); Delete is replaced by Archive and Make active, reversible
status changes. Each change leaves an audit event (admin → Audit events).
"""
from django.contrib import admin, messages
from django.db import transaction

from agents.audit import audit_record
from agents.caller import Caller
from core.admin_tools import AppendOnlyAdmin
from knowledge import services
from knowledge.errors import KnowledgeStateError
from knowledge.models import KNOWLEDGE_TYPES, FeedbackCase, Knowledge, KnowledgeResource, KnowledgeVersion

ADMIN_REASON = "edited in the admin"


class TypeFilter(admin.SimpleListFilter):
    title = "type"
    parameter_name = "type"

    def lookups(self, request, model_admin):
        return [(t, t) for t in KNOWLEDGE_TYPES]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(types__contains=[self.value()])
        return queryset


class ScopeFilter(admin.SimpleListFilter):
    title = "scope"
    parameter_name = "scope"

    def lookups(self, request, model_admin):
        scopes = sorted({s for row in Knowledge.objects.values_list("scopes", flat=True)[:5000] for s in row})
        return [(s, s) for s in scopes[:50]]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(scopes__contains=[self.value()])
        return queryset


class KnowledgeResourceInline(admin.TabularInline):
    model = KnowledgeResource
    extra = 0
    autocomplete_fields = ["resource"]


class FeedbackCaseInline(admin.TabularInline):
    model = FeedbackCase
    extra = 0
    fields = ["kind", "case", "reported_by", "created_at"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


class KnowledgeVersionInline(admin.TabularInline):
    model = KnowledgeVersion
    extra = 0
    fields = ["number", "task", "changed_by", "reason", "created_at"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Knowledge)
class KnowledgeAdmin(admin.ModelAdmin):
    list_display = ["id", "short_task", "types", "score", "helpful", "harmful", "quality", "status", "owner", "updated_at"]
    list_filter = ["status", TypeFilter, ScopeFilter, "score"]
    search_fields = ["id", "task", "content", "owner"]
    readonly_fields = ["status", "created_at", "updated_at", "helpful", "harmful", "embedding_model", "merged_into"]
    exclude = ["embedding"]
    date_hierarchy = "created_at"
    inlines = [KnowledgeResourceInline, FeedbackCaseInline, KnowledgeVersionInline]
    list_per_page = 50
    actions = ["archive", "make_active"]

    def has_add_permission(self, request):
        return False  # items come in through the API or the curation UI, which give them ids, keywords and vectors

    def has_delete_permission(self, request, obj=None):
        return False  # nothing is ever deleted: the Archive action is the reversible way out

    def save_model(self, request, obj, form, change):
        caller = Caller.for_user(request.user)
        stored = Knowledge.objects.get(pk=obj.pk)
        changes = {name: form.cleaned_data[name] for name in form.changed_data
                   if name in form.cleaned_data and form.cleaned_data[name] != getattr(stored, name)}
        if not changes:
            return
        with transaction.atomic():
            services.knowledge_change_fields(caller, knowledge_id=obj.pk, changes=changes, reason=ADMIN_REASON)
            audit_record(principal=caller.principal, operation="admin_knowledge_change", target=obj.pk, args=changes)

    def _set_status(self, request, queryset, status: str, verb: str):
        caller = Caller.for_user(request.user)
        principal = caller.principal
        done, refused = [], []
        for knowledge_id in queryset.values_list("pk", flat=True):
            try:
                with transaction.atomic():
                    services.knowledge_set_status(caller, knowledge_id=knowledge_id, status=status)
                    audit_record(principal=principal, operation=f"admin_knowledge_{verb}", target=knowledge_id,
                                 args={"status": status})
                done.append(knowledge_id)
            except KnowledgeStateError as exc:
                refused.append(exc.message)
        if done:
            self.message_user(request, f"{verb.capitalize()}d {len(done)}: {', '.join(done)}", messages.SUCCESS)
        for message in refused:
            self.message_user(request, message, messages.WARNING)

    @admin.action(description="Archive the selected items (reversible: Make active)", permissions=["change"])
    def archive(self, request, queryset):
        self._set_status(request, queryset, Knowledge.Status.ARCHIVED, "archive")

    @admin.action(description="Make the selected archived items active again", permissions=["change"])
    def make_active(self, request, queryset):
        self._set_status(request, queryset, Knowledge.Status.ACTIVE, "activate")

    @admin.display(description="task")
    def short_task(self, obj):
        return obj.task if len(obj.task) <= 80 else obj.task[:77] + "..."

    @admin.display(description="quality", ordering="quality_order")
    def quality(self, obj):
        return obj.quality_score

    def get_queryset(self, request):
        return super().get_queryset(request).with_quality("quality_order")


@admin.register(KnowledgeVersion)
class KnowledgeVersionAdmin(AppendOnlyAdmin):
    """Versions are the history: read here, restored from the curation UI (a restore makes a new version)."""

    list_display = ["knowledge", "number", "changed_by", "reason", "created_at"]
    search_fields = ["knowledge__id", "task", "content", "changed_by"]
    readonly_fields = ["knowledge", "number", "task", "content", "tags", "changed_by", "reason", "created_at"]
