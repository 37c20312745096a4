"""Subscriptions (a URL that wants some events in some scopes) and their deliveries (one event, sent, logged)."""
import base64
import secrets
import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from resources.fields import EncryptedTextField

SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    """A Standard Webhooks signing secret: `whsec_` + base64 of 24 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode("ascii")


class SubscriptionQuerySet(models.QuerySet):
    def visible_to(self, caller):
        """A person with a role sees every subscription; a (curator) token, the ones its agent made whose scopes it
        may all read. The agent id is shared by every token of the agent: another token of it, with other scopes,
        neither reads nor changes (its URL, its secret) a subscription to events it could not read itself."""
        if caller.readable_scopes is None:
            return self
        return self.filter(created_by=caller.principal, scopes__contained_by=list(caller.readable_scopes)).exclude(
            scopes=[])  # no scopes: every scope's events


class Subscription(models.Model):
    objects = SubscriptionQuerySet.as_manager()

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    url = models.URLField(max_length=2000)
    secret = EncryptedTextField(default=new_secret, help_text="the signing secret (whsec_…), encrypted at rest")
    event_types = ArrayField(models.CharField(max_length=40))
    # The scopes whose events are delivered; empty: every scope (only a person who reads every scope makes one).
    scopes = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    description = models.CharField(max_length=200, blank=True, default="")
    created_by = models.CharField(max_length=200)
    active = models.BooleanField(default=True)
    paused_reason = models.CharField(max_length=500, blank=True, default="")
    consecutive_failures = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.url


class Delivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.CharField(max_length=80, help_text="the webhook-id header: the same on every attempt")
    event_type = models.CharField(max_length=40)
    payload = models.JSONField(help_text="the body sent: {type, timestamp, data}")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.TextField(blank=True, default="", help_text="the start of the last answer")
    error = models.TextField(blank=True, default="")
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["subscription", "event_id"], name="one_delivery_per_event")]
        indexes = [models.Index(fields=["subscription", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.event_type} {self.event_id} → {self.subscription_id}"
