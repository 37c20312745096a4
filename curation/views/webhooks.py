"""Webhooks: curators subscribe URLs to events, watch each subscription's deliveries, pause, resume, delete and
re-send. Every action runs the registered webhook operation, as the API does; each subscription is one card
that an action swaps in place."""
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST, require_safe

from agents import operations
from core.errors import DomainError
from curation import permissions
from curation.forms import WebhookForm
from curation.views.common import REFUSALS, caller_of, refuse, render_parts
from knowledge.selectors import known_scopes
from webhooks.models import Delivery

PAGE = "curation/webhooks.html"
DELIVERIES_SHOWN = 10


def latest_deliveries(subscriptions) -> dict:
    """Each subscription's DELIVERIES_SHOWN latest deliveries, newest first, by subscription id: one query for all."""
    latest = {sub.pk: [] for sub in subscriptions}
    if latest:
        ranked = Delivery.objects.filter(subscription_id__in=list(latest)).annotate(rank=Window(
            RowNumber(), partition_by=[F("subscription_id")], order_by=[F("created_at").desc(), F("id").desc()]))
        for delivery in ranked.filter(rank__lte=DELIVERIES_SHOWN).order_by("subscription_id", "rank"):
            latest[delivery.subscription_id].append(delivery)
    return latest


def card(subscription, *, secret: str | None = None, message: str = "", error: str = "",
         deliveries: list | None = None) -> dict:
    if deliveries is None:
        deliveries = latest_deliveries([subscription])[subscription.pk]
    return {"sub": subscription, "deliveries": deliveries, "secret": secret, "message": message, "error": error}


def subscriptions_context(request) -> dict:
    found = operations.call("webhook_list", caller_of(request))
    latest = latest_deliveries(found["results"])
    return {"cards": [card(sub, deliveries=latest[sub.pk]) for sub in found["results"]], "count": found["count"]}


def _card_response(request, webhook_id, *, status: int = 200, **extra):
    from webhooks.operations import visible_subscription

    sub = visible_subscription(caller_of(request), webhook_id)
    return render(request, f"{PAGE}#subscription", {"card": card(sub, **extra)}, status=status)


@permissions.require(permissions.CURATE)
@require_safe
def webhooks(request):
    context = {**subscriptions_context(request), "form": WebhookForm(), "scopes": known_scopes()}
    return render(request, PAGE, context)


@never_cache  # the new subscription's secret is shown once: not to stay in a browser's or a proxy's cache (no-store)
@permissions.require(permissions.CURATE)
@require_POST
def webhook_subscribe(request):
    form = WebhookForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            sub = operations.call("webhook_subscribe", caller_of(request), data={
                "url": data["url"].strip(), "events": data["events"], "description": data["description"],
                **({"scopes": data["scopes"]} if data["scopes"] else {})})
        except REFUSALS as exc:
            refuse(form, exc)
        else:
            context = {**subscriptions_context(request), "form": WebhookForm(), "created": sub, "oob": True}
            return render_parts(request, PAGE, ["subscribe", "list"], context)
    return render(request, f"{PAGE}#subscribe", {"form": form}, status=422)


@permissions.require(permissions.CURATE)
@require_POST
def webhook_pause(request, webhook_id):
    operations.call("webhook_change", caller_of(request), data={"active": False}, webhook_id=str(webhook_id))
    return _card_response(request, webhook_id, message=_("Paused: no events are sent until you resume it."))


@permissions.require(permissions.CURATE)
@require_POST
def webhook_resume(request, webhook_id):
    try:
        operations.call("webhook_change", caller_of(request), data={"active": True}, webhook_id=str(webhook_id))
    except DomainError as exc:  # its maker may no longer curate: said on the card, which stays paused
        return _card_response(request, webhook_id, error=exc.message, status=exc.status)
    return _card_response(request, webhook_id, message=_("Resumed."))


@permissions.require(permissions.CURATE)
@require_POST
def webhook_delete(request, webhook_id):
    operations.call("webhook_delete", caller_of(request), webhook_id=str(webhook_id))
    return HttpResponse(format_html('<p class="ok" role="status">{}</p>', _("Subscription deleted.")))


@never_cache  # as resource_reveal: the secret must not stay in a browser's or a proxy's cache (Cache-Control: no-store)
@permissions.require(permissions.CURATE)
@require_POST
def webhook_secret(request, webhook_id):
    shown = operations.call("webhook_get", caller_of(request), data={"reveal": True}, webhook_id=str(webhook_id))
    return _card_response(request, webhook_id, secret=shown["secret"])


@permissions.require(permissions.CURATE)
@require_POST
def webhook_resend(request, webhook_id, delivery_id):
    try:
        operations.call("webhook_resend", caller_of(request), webhook_id=str(webhook_id), delivery_id=str(delivery_id))
    except DomainError as exc:  # still being sent
        return _card_response(request, webhook_id, message=exc.message)
    return _card_response(request, webhook_id, message=_("Re-sent: a new attempt is on its way."))
