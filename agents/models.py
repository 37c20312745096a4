from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class AgentToken(models.Model):
    """An API token for one agent: what it may read and write.

    Only a SHA-256 hash of the token is stored; the token itself is shown once.
    """

    agent_id = models.CharField(max_length=100, help_text=_("e.g. research_agent; items default to owner agent:<id>"))
    name = models.CharField(max_length=200, blank=True, default="")
    key_prefix = models.CharField(max_length=12, help_text=_("The token's first characters, to recognise it"))
    key_hash = models.CharField(max_length=64, unique=True)
    readable_scopes = ArrayField(models.CharField(max_length=200), help_text=_("Items in any of these scopes are visible"))
    writable_scopes = ArrayField(models.CharField(max_length=200), blank=True, default=list)
    can_read_secrets = models.BooleanField(default=False)
    can_curate = models.BooleanField(
        default=False, help_text=_("A curator token: edits items it does not own, restores, archives, unmerges and "
                                   "reviews merges and evolve jobs within its writable scopes"))
    static_filters = models.JSONField(
        null=True, blank=True, help_text=_("A filter expression always AND-ed with every search (never widened)")
    )
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["agent_id", "-created_at"]
        verbose_name = _("agent token")
        verbose_name_plural = _("agent tokens")
        constraints = [models.CheckConstraint(condition=models.Q(readable_scopes__len__gte=1), name="token_reads_a_scope")]

    def __str__(self) -> str:
        return f"{self.agent_id} ({self.key_prefix}…)"


class AuditEvent(models.Model):
    """One write through the API: who, what, on which item, with which arguments (secrets left out)."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    principal = models.CharField(max_length=200)
    operation = models.CharField(max_length=100)
    target = models.CharField(max_length=255, blank=True, default="")
    args = models.JSONField(default=dict)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = _("audit event")
        verbose_name_plural = _("audit events")

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.principal} {self.operation} {self.target}"


class IdempotentReply(models.Model):
    """The stored reply to a save sent with an `Idempotency-Key`: the same key from the same agent gets it again."""

    principal = models.CharField(max_length=200)
    key = models.CharField(max_length=200)
    operation = models.CharField(max_length=100)
    request_hash = models.CharField(max_length=64, help_text=_("SHA-256 of the request body, to refuse a reused key"))
    status = models.PositiveSmallIntegerField()
    body = models.JSONField(null=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["principal", "key"], name="idempotency_key_per_principal")]

    def __str__(self) -> str:
        return f"{self.principal} {self.operation} {self.key}"
