from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from agents.visibility import ScopedQuerySet
from resources.fields import EncryptedTextField

RESOURCE_ID_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*$"


class ResourceContentType(models.TextChoices):
    CODE = "code"
    CREDENTIAL = "credential"
    COOKIE = "cookie"
    TOKEN = "token"
    TEXT = "text"
    OTHER = "other"


class Resource(models.Model):
    """Raw material a knowledge item points to: code, credentials, cookies."""

    ContentType = ResourceContentType

    objects = ScopedQuerySet.as_manager()

    id = models.CharField(primary_key=True, max_length=255, help_text=_("Path-like, e.g. code/selenium/login"))
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True, default="")
    secure_body = EncryptedTextField(blank=True, default="", help_text=_("Stored encrypted at rest."))
    content_type = models.CharField(max_length=20, choices=ContentType.choices, default=ContentType.TEXT)
    metadata = models.JSONField(default=dict, blank=True)
    scopes = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    owner = models.CharField(max_length=200, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True)
    is_expired = models.BooleanField(default=False, help_text=_("set by the periodic expiry check"))
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        verbose_name = _("resource")
        verbose_name_plural = _("resources")
        constraints = [
            models.CheckConstraint(condition=models.Q(id__regex=RESOURCE_ID_PATTERN), name="resource_id_path_like"),
            models.CheckConstraint(
                condition=models.Q(content_type__in=ResourceContentType.values),
                name="resource_content_type_known",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.content_type})"

    @property
    def has_secret(self) -> bool:
        return bool(self.secure_body)


class RevealEvent(models.Model):
    """Append-only record of every secret reveal: who, when, which resource, from where."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    principal = models.CharField(max_length=200)
    resource_id = models.CharField(max_length=255, db_index=True)  # not a FK: the record outlives the resource
    version = models.PositiveIntegerField(null=True, blank=True, help_text=_("an earlier version's number; empty for the current secret"))
    remote_addr = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = _("reveal event")
        verbose_name_plural = _("reveal events")

    def __str__(self) -> str:
        which = f"{self.resource_id} (version {self.version})" if self.version else self.resource_id
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.principal} revealed {which}"


class ResourceVersion(models.Model):
    """A resource's previous state, kept (secret still encrypted) when the same id is saved again."""

    resource = models.ForeignKey(Resource, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True, default="")
    secure_body = EncryptedTextField(blank=True, default="")
    content_type = models.CharField(max_length=20)
    metadata = models.JSONField(default=dict, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    replaced_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["resource", "-number"]
        verbose_name = _("resource version")
        verbose_name_plural = _("resource versions")
        constraints = [models.UniqueConstraint(fields=["resource", "number"], name="resource_version_number_unique")]
