from django import forms
from django.contrib import admin
from django.db import transaction
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from rest_framework.exceptions import ValidationError as Refused

from agents.audit import audit_record
from agents.caller import Caller
from core.admin_tools import AppendOnlyAdmin, RefusesBadLookups, SafeJSONField, add_refusals
from resources.models import Resource, ResourceVersion, RevealEvent
from resources.serializers import ResourceInput
from resources.services import resource_change_fields, resource_reveal, resource_version_reveal, secret_expired


class RevealInAdmin:
    """A POST-only, audited "reveal" page for a row's secret, for admins (`resources.reveal_resource`).

    GET shows what would be revealed and a button; only the POST (CSRF-checked)
    reveals, writes a RevealEvent first, and renders the secret on that one
    response. The secret is never part of any list, form or log. Expired
    secrets are never revealed, here as in the API.
    """

    reveal_template = "admin/resources/reveal.html"

    def reveal_allowed(self, request) -> bool:
        return Caller.for_user(request.user).can_read_secrets  # the role's rights, as in the API and the UI

    def get_urls(self):
        info = self.model._meta.app_label, self.model._meta.model_name
        return [
            path("<path:object_id>/reveal/", self.admin_site.admin_view(self.reveal_view), name="%s_%s_reveal" % info),
            *super().get_urls(),
        ]

    def reveal_view(self, request, object_id):
        if not self.reveal_allowed(request):
            raise PermissionDenied
        obj = get_object_or_404(self.model, pk=object_id)
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "original": obj,
                   "title": _("Reveal the secret of %(resource)s") % {"resource": obj}, "has_secret": bool(obj.secure_body), "secret": None,
                   "expired": secret_expired(obj)}
        if request.method == "POST" and context["has_secret"] and not context["expired"]:
            context["secret"] = self.reveal(Caller.for_user(request.user), obj, remote_addr=request.META.get("REMOTE_ADDR"),
                                            user_agent=request.META.get("HTTP_USER_AGENT", ""))
        response = TemplateResponse(request, self.reveal_template, context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.display(description=_("secret"))
    def reveal_link(self, obj):
        if not obj.secure_body:
            return "—"
        info = self.model._meta.app_label, self.model._meta.model_name
        return format_html('<a href="{}">{}</a>', reverse("admin:%s_%s_reveal" % info, args=[obj.pk]), _("reveal…"))


class ResourceAdminForm(forms.ModelForm):
    """A new resource, and what a field of one is changed to, pass the API's rules for a saved resource
    (`ResourceInput`: a path-like id, scopes as kind:name and at least one, the length limits, metadata an object):
    a refusal is an error on its field. An empty value (no expiry) is left to the model's own check."""

    class Meta:
        field_classes = {"metadata": SafeJSONField}

    def clean(self):
        cleaned = super().clean()
        adding = self.instance._state.adding
        judged = ResourceInput().fields
        given = {name: cleaned[name] for name in (self.fields if adding else self.changed_data)
                 if name in judged and cleaned.get(name) is not None}
        try:  # partial: a field the form refused already (a missing title) is not refused twice
            ResourceInput(data=given, partial=True).is_valid(raise_exception=True)
        except Refused as exc:
            add_refusals(self, exc)
        return cleaned


@admin.register(Resource)
class ResourceAdmin(RefusesBadLookups, RevealInAdmin, admin.ModelAdmin):
    form = ResourceAdminForm
    list_display = ["id", "title", "content_type", "has_secret", "owner", "expires_at", "is_expired", "dependent_knowledge", "updated_at"]
    list_filter = ["content_type", "is_expired", ("expires_at", admin.EmptyFieldListFilter)]
    search_fields = ["id", "title", "body"]
    readonly_fields = ["created_at", "updated_at", "secret_access"]
    # The secret is never shown in the admin, only whether there is one (and, for admins, a reveal page).
    exclude = ["secure_body", "is_expired"]

    def get_readonly_fields(self, request, obj=None):
        # An existing resource changes only through `resource_change_fields`, which never renames one (knowledge
        # links to it by id): its id is shown, not offered. A new one gets its id here.
        readonly = list(super().get_readonly_fields(request, obj))
        return ["id", *readonly] if obj is not None else readonly

    def get_fields(self, request, obj=None):
        fields = list(super().get_fields(request, obj))
        return ["id", *(name for name in fields if name != "id")]  # first, editable or not

    def has_delete_permission(self, request, obj=None):
        return False  # knowledge may point at it, and nothing is ever deleted; a change keeps the old state as a version

    def save_model(self, request, obj, form, change):
        caller = Caller.for_user(request.user)
        principal = caller.principal
        stored = Resource.objects.filter(pk=obj.pk).first() if change else None
        changes = {name: form.cleaned_data[name] for name in form.changed_data
                   if name in form.cleaned_data and (stored is None or form.cleaned_data[name] != getattr(stored, name))}
        with transaction.atomic():
            if change:
                if not changes:
                    return
                resource_change_fields(caller, resource_id=obj.pk, changes=changes)
            else:
                super().save_model(request, obj, form, change)
            audit_record(principal=principal, operation="admin_resource_change" if change else "admin_resource_add",
                         target=obj.pk, args=changes)

    def reveal(self, caller, obj, **request_info):
        return resource_reveal(caller, resource=obj, **request_info)

    @admin.display(description=_("used by"))
    def dependent_knowledge(self, obj):
        return obj.knowledge.count()

    @admin.display(boolean=True, description=_("secret"))
    def has_secret(self, obj):
        return obj.has_secret

    @admin.display(description=_("secret"))
    def secret_access(self, obj):
        return self.reveal_link(obj) if obj.pk else "—"


@admin.register(ResourceVersion)
class ResourceVersionAdmin(RefusesBadLookups, RevealInAdmin, AppendOnlyAdmin):
    """Earlier states of resources: kept as evidence, their secrets revealable by admins only."""

    list_display = ["resource", "number", "title", "content_type", "replaced_by", "created_at", "reveal_link"]
    list_filter = ["content_type"]
    search_fields = ["resource__id", "title"]
    exclude = ["secure_body"]
    readonly_fields = ["resource", "number", "title", "body", "content_type", "metadata", "expires_at", "replaced_by",
                       "created_at", "reveal_link"]

    def reveal(self, caller, obj, **request_info):
        return resource_version_reveal(caller, version=obj, **request_info)


@admin.register(RevealEvent)
class RevealEventAdmin(RefusesBadLookups, AppendOnlyAdmin):
    list_display = ["at", "principal", "resource_id", "version", "remote_addr"]
    list_filter = ["version"]
    search_fields = ["principal", "resource_id"]
    readonly_fields = ["at", "principal", "resource_id", "version", "remote_addr", "user_agent"]
