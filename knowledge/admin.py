"""The Django admin over knowledge: every change goes through the services, and nothing is deleted.

An edit of task, content, tags or types keeps the old text as a version and re-embeds the item
(`services.knowledge_change_fields`), and only the fields that service changes are offered; Delete is
replaced by Archive and Make active, reversible status changes. A changed field is held to the API's rules
(`inputs.item_changes_check`: scopes as kind:name, http(s) source URLs, the length limits), and a linked resource
passes the API's check (`services.check_new_item`: readable by everyone who can read the item), when it is
linked and when the item's scopes widen; a refusal is an error on its field. Each change leaves an audit event
(admin → Audit events).
"""
from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import ORDER_VAR
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Q
from django.forms.models import BaseInlineFormSet
from django.http import Http404
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _
from rest_framework.exceptions import APIException, PermissionDenied
from rest_framework.exceptions import ValidationError as Refused

from agents import operations
from agents.audit import audit_record
from agents.caller import Caller
from core.admin_tools import AppendOnlyAdmin, RefusesBadLookups, SafeJSONField, add_refusals
from core.errors import DomainError
from knowledge import services
from knowledge.inputs import item_changes_check
from knowledge.errors import ResourceScopeError, UnknownResourceError
from knowledge.models import KNOWLEDGE_TYPES, Knowledge, KnowledgeResource, KnowledgeVersion
from knowledge.search import keyword
from knowledge.selectors import UNSHOWN, known_scopes

ADMIN_REASON = "edited in the admin"
ID_PREFIX = "knowledge-"


class TypeFilter(admin.SimpleListFilter):
    title = _("type")
    parameter_name = "type"

    def lookups(self, request, model_admin):
        return [(t, t) for t in KNOWLEDGE_TYPES]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(types__contains=[self.value()])
        return queryset


class ScopeFilter(admin.SimpleListFilter):
    title = _("scope")
    parameter_name = "scope"

    def lookups(self, request, model_admin):
        return [(s, s) for s in known_scopes()[:50]]  # kept a minute per process, as the curation list's suggestions

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(scopes__contains=[self.value()])
        return queryset


class CountedApart(Paginator):
    """Pages of `object_list`, counted as `counted` (the same items, read another way)."""

    def __init__(self, object_list, *args, counted, **kwargs):
        super().__init__(object_list, *args, **kwargs)
        self.counted = counted

    @cached_property
    def count(self):
        return self.counted.count()


class ScoreFilter(admin.SimpleListFilter):
    """The scores 1 to 5, listed without reading the items (a filter on the field lists the values found in them:
    a DISTINCT over every item, 82 ms at 100k items)."""

    title = _("score")
    parameter_name = "score"
    SCORES = [str(n) for n in range(1, 6)]

    def lookups(self, request, model_admin):
        return [(n, n) for n in self.SCORES]

    def queryset(self, request, queryset):
        return queryset.filter(score=int(self.value())) if self.value() in self.SCORES else queryset


def check_links(caller, *, scopes, resource_ids, secure_resource_id: str = "") -> None:
    """The API's check of an item's linked resources (`services.check_new_item`), its refusal as a form error."""
    try:
        services.check_new_item(caller, scopes=list(scopes), resource_ids=list(resource_ids),
                                secure_resource_id=secure_resource_id)
    except (UnknownResourceError, ResourceScopeError) as exc:
        raise ValidationError(exc.message) from exc
    except PermissionDenied as exc:  # the caller may not write one of the item's scopes
        raise ValidationError(str(exc.detail)) from exc


def linked_resource_ids(item) -> list[str]:
    return list(KnowledgeResource.objects.filter(knowledge_id=item.pk).order_by("position", "id")
                .values_list("resource_id", flat=True))


def refusal_text(knowledge_id: str, exc: Exception) -> str:
    """An operation's refusal of one item, in a line."""
    if isinstance(exc, Http404):
        return _("%(id)s: no such item visible to you") % {"id": knowledge_id}
    message = exc.message if isinstance(exc, DomainError) else str(getattr(exc, "detail", exc))
    return message if knowledge_id in message else f"{knowledge_id}: {message}"


class KnowledgeResourceFormSet(BaseInlineFormSet):
    """A resource linked here (a new row, or a row pointed at another resource) passes the API's check against the
    item's scopes as the form leaves them; unlinking or reordering shows no one anything new. `caller` is set
    per request by the inline."""

    caller = None

    def clean(self):
        super().clean()
        if any(self.errors):
            return
        linked = [form.cleaned_data["resource"].pk for form in self.forms
                  if "resource" in form.changed_data and form.cleaned_data.get("resource") is not None
                  and not (self.can_delete and self._should_delete_form(form))]
        if linked:
            check_links(self.caller, scopes=self.instance.scopes, resource_ids=linked)


class KnowledgeResourceInline(admin.TabularInline):
    model = KnowledgeResource
    formset = KnowledgeResourceFormSet
    extra = 0
    autocomplete_fields = ["resource"]

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        return type(formset.__name__, (formset,), {"caller": Caller.for_user(request.user)})


class KnowledgeAdminForm(forms.ModelForm):
    """What a field is changed to passes the API's rules for it (`inputs.item_changes_check`; the tag names the item
    has already may stay). Widening an item's scopes lets its new readers see its links: they must pass the API's
    check in the new scopes (narrowing them shows no one anything new). `caller` is set per request by
    KnowledgeAdmin."""

    caller = None

    class Meta:
        field_classes = {"tags": SafeJSONField, "source": SafeJSONField}

    def clean(self):
        cleaned = super().clean()
        changed = {name: cleaned[name] for name in self.changed_data if name in cleaned}
        try:
            item_changes_check(changed, kept_tags=self.instance.tags or {})
        except Refused as exc:
            add_refusals(self, exc)
        scopes = cleaned.get("scopes")
        stored = self.instance
        if stored.pk and stored.status == Knowledge.Status.MERGED and set(services.TEXT_FIELDS) & set(changed):
            self.add_error(None, services.not_editable(stored.pk, stored.status, stored.merged_into_id))
        if stored.pk and scopes is not None and set(scopes) - set(stored.scopes):
            try:
                check_links(self.caller, scopes=scopes, resource_ids=linked_resource_ids(stored),
                            secure_resource_id=stored.secure_resource_id)
            except ValidationError as exc:
                self.add_error("scopes", exc)
        return cleaned


# An item's reports and old versions are shown newest first, HISTORY_SHOWN of each, as read-only tables: as inlines
# every one was a form (an item with 5,000 reports: 3.6 s and 6.6 MB a page at 100k items), and the curation UI's
# item page pages through all of them.
HISTORY_SHOWN = 20


def history_table(rows, columns: list[tuple[str, str]], *, total: int, item_id: str):
    """`rows` (dicts, newest first, at most HISTORY_SHOWN) as a table under `columns` (key, heading), saying how many
    there are in all and where to read the rest."""
    if not total:
        return _("none")
    head = format_html_join("", "<th>{}</th>", ((heading,) for _key, heading in columns))
    body = format_html_join("", "<tr>{}</tr>", ((format_html_join("", "<td>{}</td>", ((row[key],) for key, _h in columns)),)
                                                for row in rows))
    more = format_html(_(" (the newest {shown} of {total}: every one on <a href=\"{url}\">the item's page</a>)"),
                       shown=len(rows), total=total, url=reverse("curation:knowledge_detail", args=[item_id])) \
        if total > len(rows) else ""
    return format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table><p>{} {}</p>", head, body,
                       _("%(total)d in all") % {"total": total}, more)


# Shown in the form, never offered: every field `services.knowledge_change_fields` does not change (the id, the
# status and what comes with it, counters, the secret's resource, timestamps), so a form never posts one it refuses.
NOT_CHANGED_BY_THE_SERVICE = [field.name for field in Knowledge._meta.concrete_fields
                              if field.editable and field.name != "embedding"  # excluded: never shown
                              and field.name not in (*services.TEXT_FIELDS, *services.PLAIN_FIELDS)]


@admin.register(Knowledge)
class KnowledgeAdmin(RefusesBadLookups, admin.ModelAdmin):
    form = KnowledgeAdminForm
    list_display = ["id", "short_task", "types", "score", "helpful", "harmful", "quality", "status", "owner", "updated_at"]
    # By creation date through Django's date filter (today, the past week, month, year), not a date hierarchy: the
    # hierarchy first reads the first and last dates of the listed items, and for a search or a filter matching few
    # of them PostgreSQL walks the dates' index testing every item (0.9 s at 100k items).
    list_filter = ["status", TypeFilter, ScopeFilter, ScoreFilter, "created_at"]
    search_fields = ["id", "owner", "task", "content"]  # what the box searches, the way get_search_results says
    exclude = ["embedding"]
    readonly_fields = [*NOT_CHANGED_BY_THE_SERVICE, "reports", "versions"]
    inlines = [KnowledgeResourceInline]
    list_per_page = 50
    # one count a page, not two: a filtered list says how many match, not also how many there are in all (a
    # second COUNT of every item, 6 ms at 100k items, ~10x that at 1M)
    show_full_result_count = False
    actions = ["archive", "make_active"]

    def has_add_permission(self, request):
        return False  # items come in through the API or the curation UI, which give them ids, keywords and vectors

    def get_queryset(self, request):
        """Never the vector or the keyword document (no page shows them), and on the list not the content either: a
        page of 50 read 50 vectors of ~900 numbers and parsed each into an array, a third of its time."""
        queryset = super().get_queryset(request).defer(*UNSHOWN)
        match = getattr(request, "resolver_match", None)
        if match is not None and match.url_name == f"{self.opts.app_label}_{self.opts.model_name}_changelist":
            return queryset.defer("content")
        return queryset

    def has_delete_permission(self, request, obj=None):
        return False  # nothing is ever deleted: the Archive action is the reversible way out

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"caller": Caller.for_user(request.user)})

    def get_fields(self, request, obj=None):
        fields = list(super().get_fields(request, obj))
        return ["id", *(name for name in fields if name != "id")]  # first, though read-only

    def save_formset(self, request, form, formset, change):
        if formset.model is not KnowledgeResource:
            return super().save_formset(request, form, formset, change)
        # Checked in KnowledgeResourceFormSet.clean; saved in the change view's transaction, with its audit row.
        item = form.instance
        before = linked_resource_ids(item)
        formset.save()
        after = linked_resource_ids(item)
        if after != before:
            audit_record(principal=Caller.for_user(request.user).principal, operation="admin_knowledge_change",
                         target=item.pk, args={"resource_ids": after, "previous_resource_ids": before})

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

    def _set_status(self, request, queryset, operation: str, done: str):
        """Each selected item through the operation the API and the curation UI call (`knowledge_archive`,
        `knowledge_activate`: which un-supersedes a superseded item and reopens its conflict), audited by the chain."""
        caller = Caller.for_user(request.user)
        changed, refused = [], []
        for knowledge_id in queryset.values_list("pk", flat=True):
            try:
                operations.call(operation, caller, knowledge_id=knowledge_id, data={"reason": ADMIN_REASON})
                changed.append(knowledge_id)
            except (DomainError, APIException, Http404) as exc:
                refused.append(refusal_text(knowledge_id, exc))
        if changed:
            self.message_user(request, done % {"count": len(changed), "ids": ", ".join(changed)}, messages.SUCCESS)
        for message in refused:
            self.message_user(request, message, messages.WARNING)

    @admin.action(description=_("Archive the selected items (reversible: Make active)"), permissions=["change"])
    def archive(self, request, queryset):
        self._set_status(request, queryset, "knowledge_archive", _("Archived %(count)d: %(ids)s"))

    @admin.action(description=_("Make the selected archived or superseded items active again"), permissions=["change"])
    def make_active(self, request, queryset):
        self._set_status(request, queryset, "knowledge_activate", _("Made active %(count)d: %(ids)s"))

    @admin.display(description=_("task"))
    def short_task(self, obj):
        return obj.task if len(obj.task) <= 80 else obj.task[:77] + "..."

    @admin.display(description=_("quality"), ordering="standing__quality")
    def quality(self, obj):
        return obj.quality_score

    @admin.display(description=_("reports"))
    def reports(self, obj):
        cases = obj.feedback_cases.order_by("-created_at", "-id").values("kind", "case", "reported_by", "created_at")
        return history_table(cases[:HISTORY_SHOWN], [("kind", _("kind")), ("case", _("case")),
                                                     ("reported_by", _("reported by")), ("created_at", _("when"))],
                             total=obj.feedback_cases.count(), item_id=obj.pk)

    @admin.display(description=_("versions"))
    def versions(self, obj):
        versions = obj.versions.order_by("-number").values("number", "task", "changed_by", "reason", "created_at")
        return history_table(versions[:HISTORY_SHOWN], [("number", _("number")), ("task", _("task")),
                                                        ("changed_by", _("changed by")), ("reason", _("reason")),
                                                        ("created_at", _("when"))],
                             total=obj.versions.count(), item_id=obj.pk)

    def get_paginator(self, request, queryset, per_page, orphans=0, allow_empty_first_page=True):
        """Sorted by quality, a page is read through each item's Standing (its indexed copy of the quality) joined,
        not outer-joined (every item has one), so the standing's index gives the order instead of a sort of every
        item (89 ms at 100k items), as the curation list does; the items are counted without the join (70-90 ms)."""
        columns = ["action_checkbox", *self.list_display] if self.get_actions(request) else self.list_display
        if str(columns.index("quality")) not in request.GET.get(ORDER_VAR, "").replace("-", "").split("."):
            return super().get_paginator(request, queryset, per_page, orphans, allow_empty_first_page)
        return CountedApart(queryset.filter(standing__isnull=False), per_page, orphans, allow_empty_first_page,
                            counted=queryset)

    def get_search_results(self, request, queryset, search_term):
        """Items whose text holds every word of the term as the keyword search reads words (Chinese segmented,
        English stemmed), whose owner or id it is, or, for a term starting as ids do, whose id starts with it: each
        through an index, not Django's substring search of task and content, a pass over every item's text (1.4 s
        at 100k items)."""
        term = search_term.strip()
        if not term:
            return queryset, False
        found = Q(pk=term) | Q(owner=term)
        if term.startswith(ID_PREFIX):
            found |= Q(id__startswith=term)
        words = keyword.holding_every_word(term)
        return queryset.filter(found | Q(words) if words is not None else found), False


@admin.register(KnowledgeVersion)
class KnowledgeVersionAdmin(RefusesBadLookups, AppendOnlyAdmin):
    """Versions are the history: read here, restored from the curation UI (a restore makes a new version)."""

    list_display = ["knowledge", "number", "changed_by", "reason", "created_at"]
    search_fields = ["knowledge__id", "task", "content", "changed_by"]
    readonly_fields = ["knowledge", "number", "task", "content", "tags", "changed_by", "reason", "created_at"]
