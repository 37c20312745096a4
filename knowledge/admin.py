from django.contrib import admin

from knowledge.models import KNOWLEDGE_TYPES, FeedbackCase, Knowledge, KnowledgeResource, KnowledgeVersion


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
    readonly_fields = ["created_at", "updated_at", "helpful", "harmful", "embedding_model", "merged_into"]
    exclude = ["embedding"]
    date_hierarchy = "created_at"
    inlines = [KnowledgeResourceInline, FeedbackCaseInline, KnowledgeVersionInline]
    list_per_page = 50

    @admin.display(description="task")
    def short_task(self, obj):
        return obj.task if len(obj.task) <= 80 else obj.task[:77] + "..."

    @admin.display(description="quality", ordering="quality_order")
    def quality(self, obj):
        return obj.quality_score

    def get_queryset(self, request):
        from django.db.models import F

        return super().get_queryset(request).annotate(quality_order=F("score") + F("helpful") - 2 * F("harmful"))


@admin.register(KnowledgeVersion)
class KnowledgeVersionAdmin(admin.ModelAdmin):
    list_display = ["knowledge", "number", "changed_by", "reason", "created_at"]
    search_fields = ["knowledge__id", "task", "content", "changed_by"]
    readonly_fields = ["knowledge", "number", "task", "content", "tags", "changed_by", "reason", "created_at"]

    def has_add_permission(self, request):
        return False
