"""The webhook operations: curators (the curator role, or a curator token) subscribe URLs to events.

A person with the curator role sees and changes every subscription; a curator token the ones it made
(`Subscription.objects.visible_to`). The signing secret is in the reply that creates a subscription, and
afterwards only on asking (`webhook_get` with `reveal`), to whoever may see the subscription; each such reveal
leaves an audit record (`webhook_secret_reveal`, naming the subscription).
"""
import uuid

from django.http import Http404
from rest_framework import serializers

from agents.audit import audit_record
from agents.operations import operation
from core import events
from core.fields import NoUnknownFields, StrictBooleanField, valid_scopes
from webhooks import services
from webhooks.models import Delivery, Subscription

RECENT_DELIVERIES = 50


class SubscribeInput(NoUnknownFields, serializers.Serializer):
    url = serializers.CharField(max_length=2000, help_text="http(s) URL receiving POSTs; public addresses only, "
                                                           "unless KNOWHUB_WEBHOOK_ALLOW names it")
    events = serializers.ListField(child=serializers.ChoiceField(choices=events.EVENT_TYPES), min_length=1,
                                   max_length=len(events.EVENT_TYPES))
    scopes = serializers.ListField(child=serializers.CharField(max_length=200), required=False, max_length=50,
                                   help_text="events of these scopes (each readable by you); default: a token's "
                                             "readable scopes, a person's every scope")
    description = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")

    def validate_scopes(self, value):
        return valid_scopes(value)


class ChangeInput(SubscribeInput):
    url = serializers.CharField(max_length=2000, required=False)
    events = serializers.ListField(child=serializers.ChoiceField(choices=events.EVENT_TYPES), min_length=1,
                                   max_length=len(events.EVENT_TYPES), required=False)
    description = serializers.CharField(max_length=200, required=False, allow_blank=True)
    active = StrictBooleanField(required=False, help_text="false pauses; true resumes (clears the pause and the "
                                                          "failure count)")


class GetInput(NoUnknownFields, serializers.Serializer):
    reveal = StrictBooleanField(required=False, default=False, help_text="add the signing secret")


class DeliveryOutput(serializers.Serializer):
    id = serializers.UUIDField()
    event_id = serializers.CharField()
    event_type = serializers.CharField()
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    response_status = serializers.IntegerField(allow_null=True)
    response_body = serializers.CharField(help_text="the start of the last answer")
    error = serializers.CharField()
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    last_attempt_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    payload = serializers.JSONField()


class SubscriptionOutput(serializers.Serializer):
    id = serializers.UUIDField()
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.CharField(), source="event_types")
    scopes = serializers.ListField(child=serializers.CharField(), help_text="empty: every scope")
    description = serializers.CharField()
    active = serializers.BooleanField()
    paused_reason = serializers.CharField()
    consecutive_failures = serializers.IntegerField()
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class SubscriptionCreatedOutput(SubscriptionOutput):
    secret = serializers.CharField(help_text="whsec_…: verify each delivery's webhook-signature with it")


class SubscriptionDetailOutput(SubscriptionOutput):
    secret = serializers.CharField(required=False, help_text="only with reveal=true")
    deliveries = DeliveryOutput(many=True, help_text=f"the {RECENT_DELIVERIES} most recent, newest first")


class SubscriptionListOutput(serializers.Serializer):
    count = serializers.IntegerField()
    results = SubscriptionOutput(many=True)


class DeletedOutput(serializers.Serializer):
    id = serializers.UUIDField()
    deleted = serializers.BooleanField()


def visible_subscription(caller, webhook_id) -> Subscription:
    try:
        webhook_id = uuid.UUID(str(webhook_id))
    except ValueError:
        raise Http404 from None
    sub = Subscription.objects.visible_to(caller).filter(pk=webhook_id).first()
    if sub is None:
        raise Http404
    return sub


@operation("webhook_subscribe", input=SubscribeInput, output=SubscriptionCreatedOutput, writes=True,
           permission="curate", status=201)
def webhook_subscribe(caller, *, url, events, scopes=None, description="") -> Subscription:
    """Subscribe a URL to events in scopes you can read; the reply holds the signing secret."""
    return services.subscription_create(caller, url=url, event_types=events, scopes=scopes, description=description)


@operation("webhook_list", output=SubscriptionListOutput, permission="curate")
def webhook_list(caller) -> dict:
    """Webhook subscriptions, newest first, with their state (active, or paused and why)."""
    subs = list(Subscription.objects.visible_to(caller))
    return {"count": len(subs), "results": subs}


@operation("webhook_get", input=GetInput, output=SubscriptionDetailOutput, permission="curate")
def webhook_get(caller, *, webhook_id, reveal=False) -> dict:
    """One subscription with its recent deliveries (status, response, attempts); reveal=true adds its secret."""
    sub = visible_subscription(caller, webhook_id)
    detail = {**{f: getattr(sub, f) for f in ("id", "url", "event_types", "scopes", "description", "active",
                                               "paused_reason", "consecutive_failures", "created_by", "created_at",
                                               "updated_at")},
              "deliveries": list(sub.deliveries.all()[:RECENT_DELIVERIES])}
    if reveal:  # recorded first, as a resource's reveal is: no secret leaves unrecorded
        audit_record(principal=caller.principal, operation="webhook_secret_reveal", target=str(sub.pk),
                     args={"webhook_id": str(sub.pk), "reveal": True})
        detail["secret"] = sub.secret
    return detail


@operation("webhook_change", input=ChangeInput, output=SubscriptionOutput, writes=True, permission="curate")
def webhook_change(caller, *, webhook_id, url=None, events=None, scopes=None, description=None,
                   active=None) -> Subscription:
    """Change a subscription's URL, events, scopes or description; active=false pauses it, true resumes it."""
    sub = visible_subscription(caller, webhook_id)
    return services.subscription_change(caller, subscription=sub, url=url, event_types=events, scopes=scopes,
                                        description=description, active=active)


@operation("webhook_delete", output=DeletedOutput, writes=True, permission="curate")
def webhook_delete(caller, *, webhook_id) -> dict:
    """Delete a subscription and its delivery log."""
    sub = visible_subscription(caller, webhook_id)
    services.subscription_delete(caller, subscription=sub)
    return {"id": sub.pk, "deleted": True}


@operation("webhook_resend", output=DeliveryOutput, writes=True, permission="curate", status=202)
def webhook_resend(caller, *, webhook_id, delivery_id) -> Delivery:
    """Send a finished delivery again (same event id and body, a new attempt); 409 while it is still being sent."""
    sub = visible_subscription(caller, webhook_id)
    try:
        delivery = sub.deliveries.filter(pk=uuid.UUID(str(delivery_id))).first()
    except ValueError:
        delivery = None
    if delivery is None:
        raise Http404
    return services.delivery_resend(caller, delivery=delivery)
