"""The knowledge data model of seed 003.

Relational columns where we filter, rank or count (types, scopes, score,
helpful, harmful, status); JSON where the shape is open (tags, source).
Feedback cases live in their own table so that recording one is an INSERT
plus an atomic counter UPDATE, never a read-modify-write of a growing list.
The seed's nested JSON shape is produced by `knowledge.serializers`.
"""
import uuid

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import F, Q
from django.db.models.fields.json import KeyTransform
from django.db.models.lookups import Exact
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.contrib.postgres.search import SearchVectorField
from pgvector.django import VectorField

from agents.visibility import ScopedQuerySet
from knowledge.ids import ID_PATTERN
from knowledge.quality import QUALITY, quality_score



class KnowledgeType(models.TextChoices):
    USER_PROFILE = "user_profile", "User profile"
    STRATEGY = "strategy", "Strategy"
    TOOL = "tool", "Tool"
    USECASE = "usecase", "Use case"
    DEFINITION = "definition", "Definition"
    PLAN = "plan", "Plan"


KNOWLEDGE_TYPES = [t.value for t in KnowledgeType]


def _jsonb_typeof(field: str) -> models.Func:
    return models.Func(models.F(field), function="jsonb_typeof", output_field=models.CharField())


# True when some value of the object is not a string: tags map strings to strings.
_TAG_VALUE_NOT_STRING = models.Func(
    models.F("tags"),
    models.Value('$.* ? (@.type() != "string")'),
    function="jsonb_path_exists",
    output_field=models.BooleanField(),
)


class KnowledgeStatus(models.TextChoices):
    ACTIVE = "active"
    ARCHIVED = "archived"
    MERGED = "merged"
    SUPERSEDED = "superseded"  # replaced by a better item (`superseded_by`); search skips it unless asked


class KnowledgeQuerySet(ScopedQuerySet):
    def with_quality(self, name: str = "quality"):
        """Each item's quality (knowledge.quality) as the annotation `name`, to sort or filter by."""
        return self.annotate(**{name: QUALITY})


class Knowledge(models.Model):
    Status = KnowledgeStatus

    objects = KnowledgeQuerySet.as_manager()

    id = models.CharField(primary_key=True, max_length=40)
    message_id = models.CharField(max_length=200, blank=True, default="")
    types = ArrayField(models.CharField(max_length=20, choices=KnowledgeType.choices))
    task = models.TextField()
    content = models.TextField()
    tags = models.JSONField(default=dict, blank=True)
    scopes = ArrayField(models.CharField(max_length=200))
    owner = models.CharField(max_length=200)
    resources = models.ManyToManyField(
        "resources.Resource", through="KnowledgeResource", related_name="knowledge", blank=True
    )
    source = models.JSONField(default=dict, blank=True)
    # The seed's reference to a secret-holding resource (a credential or cookie), checked like resource_ids.
    secure_resource_id = models.CharField(max_length=255, blank=True, default="")

    score = models.SmallIntegerField(default=3)
    helpful = models.PositiveIntegerField(default=0)
    harmful = models.PositiveIntegerField(default=0)
    confidence = models.FloatField(default=0.5)

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    merged_into = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="merged_from"
    )
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="supersedes",
        help_text=_("the item that replaced this one (status superseded); making it active again clears it"),
    )

    # No fixed dimension: the embedder is configurable. Each embedder gets a
    # partial HNSW index on `embedding::vector(N) WHERE embedding_model = name`
    # (knowledge.search.vector.ensure_index), so a model change needs no migration.
    embedding = VectorField(null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True, default="")
    # Keyword index: task, content and tag values, Chinese pre-segmented
    # (knowledge.search.keyword.document_expression).
    search_document = SearchVectorField(null=True, blank=True, editable=False)
    # Writing system of task + content (knowledge.search.text.script_of): vector
    # search calibrates similarities within each one (knowledge.search.crosslingual).
    script = models.CharField(max_length=12, blank=True, default="", editable=False)

    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("knowledge item")
        verbose_name_plural = _("knowledge")
        indexes = [
            GinIndex(fields=["types"], name="knowledge_types_gin"),
            GinIndex(fields=["scopes"], name="knowledge_scopes_gin"),
            models.Index(fields=["status", "-created_at"], name="knowledge_status_created"),
            GinIndex(fields=["search_document"], name="knowledge_search_document_gin"),
            # vector search counts each writing system's visible items per search (crosslingual.scripts_present):
            # an index-only scan, scopes and status read from the index
            models.Index(fields=["embedding_model", "script"], include=["status", "scopes"], name="knowledge_model_script"),
            GinIndex(fields=["tags"], opclasses=["jsonb_path_ops"], name="knowledge_tags_gin"),  # tags={...} filters
            # newest first over every status: the dashboard's recent saves, the list with status "any"
            models.Index(fields=["-created_at", "-id"], name="knowledge_created"),
            # most harmful first, over every status: the list's "harmful" sort (with status "any" too: 119 ms at
            # 100k items when the index held active items only) and the dashboard's attention lists. No index holds
            # `helpful`: a helpful report (the most frequent write) then stays a HOT update, which leaves the row's
            # other indexes, its HNSW graphs among them, untouched; a harmful report now rewrites them. The sorts
            # by quality and by helpful read the item's Standing, a narrow copy with indexes of its own.
            models.Index(fields=["-harmful", "-created_at", "id"], name="knowledge_harmful"),
            # the items read from one document (ingest.chunks.items_of: every Markdown, CSV and document reading
            # looks its file's items up by its uri); `source` changes only when a document is read again, so
            # reports stay HOT updates
            models.Index(KeyTransform("uri", KeyTransform("document", "source")), name="knowledge_document_uri"),
            # the items still without a vector, oldest first (indexing.stale_items: the worker's sweep every 15 s,
            # /metrics' pending count), with `knowledge_model_script` for those of another model
            models.Index(fields=["created_at", "id"], name="knowledge_without_vector", condition=Q(embedding__isnull=True)),
            # one owner's items: the curation list's owner filter, the admin's search, an `owner` filter expression
            models.Index(fields=["owner"], name="knowledge_owner"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(id__regex=ID_PATTERN), name="knowledge_id_format"),
            models.CheckConstraint(condition=Q(score__gte=1, score__lte=5), name="knowledge_score_1_to_5"),
            models.CheckConstraint(
                condition=Q(confidence__gte=0, confidence__lte=1), name="knowledge_confidence_0_to_1"
            ),
            models.CheckConstraint(
                condition=Q(types__len__gte=1) & Q(types__contained_by=KNOWLEDGE_TYPES),
                name="knowledge_types_known",
            ),
            models.CheckConstraint(condition=Q(scopes__len__gte=1), name="knowledge_has_scope"),
            models.CheckConstraint(
                condition=Exact(_jsonb_typeof("tags"), "object") & Exact(_TAG_VALUE_NOT_STRING, False),
                name="knowledge_tags_string_map",
            ),
            models.CheckConstraint(condition=Exact(_jsonb_typeof("source"), "object"), name="knowledge_source_object"),
            models.CheckConstraint(
                condition=Q(status__in=KnowledgeStatus.values), name="knowledge_status_known"
            ),
            models.CheckConstraint(
                condition=Q(merged_into__isnull=True) | Q(status="merged"), name="knowledge_merged_into_only_when_merged"
            ),
            models.CheckConstraint(
                condition=Q(superseded_by__isnull=True, status__in=["active", "archived", "merged"])
                | Q(superseded_by__isnull=False, status="superseded"),
                name="knowledge_superseded_by_when_superseded",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id}: {self.task[:60]}"

    @property
    def quality_score(self) -> float:
        """The seed's rerank score: score + helpful - 2 * harmful (knowledge.quality)."""
        return quality_score(self.score, self.helpful, self.harmful)

    @property
    def resource_ids(self) -> list[str]:
        return [link.resource_id for link in self.resource_links.all()]


class Standing(models.Model):
    """An item's quality (score + helpful − 2 × harmful) and helpful count beside its creation time, copied by
    triggers on the items (migration 0006) whenever those change, so the curation list sorts by quality or
    helpfulness through an index instead of reading every item (96 ms at 100k items). The items themselves keep no
    index holding `helpful` (Knowledge.Meta): here a feedback report rewrites this narrow row's three btree entries,
    not the item's HNSW graphs. Every item has exactly one; Django never writes them."""

    knowledge = models.OneToOneField(Knowledge, primary_key=True, on_delete=models.DO_NOTHING, db_constraint=False,
                                     related_name="standing")
    quality = models.IntegerField()
    helpful = models.IntegerField()
    created_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(F("quality").desc(), F("created_at").desc(), "knowledge", name="standing_by_quality"),
            models.Index(F("helpful").desc(), F("created_at").desc(), "knowledge", name="standing_by_helpful"),
        ]


class KnowledgeResource(models.Model):
    """An ordered reference from a knowledge item to a resource."""

    knowledge = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="resource_links")
    resource = models.ForeignKey("resources.Resource", on_delete=models.PROTECT, related_name="knowledge_links")
    position = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["position"]
        verbose_name = _("linked resource")
        verbose_name_plural = _("linked resources")
        constraints = [
            models.UniqueConstraint(fields=["knowledge", "resource"], name="knowledge_resource_once"),
        ]


class FeedbackCase(models.Model):
    """One helpful or harmful report: an entry of `eval.helpful_history` / `harmful_history`."""

    class Kind(models.TextChoices):
        HELPFUL = "helpful"
        HARMFUL = "harmful"

    knowledge = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="feedback_cases")
    kind = models.CharField(max_length=7, choices=Kind.choices)
    case = models.JSONField(default=dict, help_text=_("The case as reported: task, outcome, reason, timestamp, ..."))
    reported_by = models.CharField(max_length=200, blank=True, default="")
    # The logged search the reporter found the item in (its `search_id`); null when none was sent
    # or the log has passed its retention period.
    search = models.ForeignKey("SearchLog", null=True, blank=True, on_delete=models.SET_NULL, related_name="feedback_cases")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        verbose_name = _("feedback case")
        verbose_name_plural = _("feedback cases")
        indexes = [
            models.Index(fields=["knowledge", "kind", "id"], name="feedback_by_item"),
            models.Index(fields=["created_at", "kind"], name="feedback_created"),  # the dashboard's days and recent reports
        ]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=["helpful", "harmful"]), name="feedback_kind_known"),
        ]


class KnowledgeVersion(models.Model):
    """The state of task/content/tags before a change, and who changed it and why."""

    knowledge = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    task = models.TextField()
    content = models.TextField()
    tags = models.JSONField(default=dict, blank=True)
    changed_by = models.CharField(max_length=200, help_text=_("agent:<id>, user:<name> or job:<kind>:<id>"))
    reason = models.TextField(blank=True, default="")
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="versions")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["knowledge", "-number"]
        verbose_name = _("knowledge version")
        verbose_name_plural = _("knowledge versions")
        indexes = [models.Index(fields=["-created_at"], name="version_created")]  # the dashboard's recent edits
        constraints = [
            models.UniqueConstraint(fields=["knowledge", "number"], name="knowledge_version_number_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.knowledge_id} v{self.number}"


class SlimRejection(models.Model):
    """A pair a curator said must not be merged; slim never proposes it again."""

    first = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="+")
    second = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="+")
    rejected_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["first", "second"], name="slim_rejection_once"),
            models.CheckConstraint(condition=Q(first__lt=F("second")), name="slim_rejection_ordered"),
        ]


class SearchLog(models.Model):
    """One agent search (REST or MCP) and what it returned, kept to learn from the feedback that cites it.

    `scopes` are the scopes the search could see: the caller's readable scopes, narrowed to the
    request's `scopes` when it named some it may read. NULL means every scope (a person with a role
    searched through the API). A log is visible to whoever may read one of its scopes
    (`knowledge.search_log.search_logs_visible_to`), and deleted after
    KNOWHUB_SEARCH_LOG_RETENTION_DAYS.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    principal = models.CharField(max_length=200)
    scopes = ArrayField(models.CharField(max_length=200), null=True, blank=True)
    query = models.TextField()
    parameters = models.JSONField(default=dict, help_text=_("top_k, min_score, types, scopes, rank, filters (JSON)"))
    result_ids = ArrayField(models.CharField(max_length=40), default=list, blank=True,
                            help_text=_("the ids returned, best first"))

    class Meta:
        ordering = ["-created_at"]
        indexes = [GinIndex(fields=["scopes"], name="search_log_scopes_gin")]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.principal}: {self.query[:60]}"


class Conflict(models.Model):
    """Two close items found when one of them was saved or edited (knowledge.conflicts), awaiting a person.

    `kind` is the LLM's judgment of the pair, or `close` when no LLM is configured (a person judges it).
    A pair has one record whatever happens to it, so a dismissed or kept pair is never raised again; a
    reopened one is open again. `resolution` says what the action did, so it can be reversed.
    """

    class Kind(models.TextChoices):
        DUPLICATE = "duplicate"
        REFINEMENT = "refinement"
        CONTRADICTION = "contradiction"
        CLOSE = "close", "close (not judged)"

    class Status(models.TextChoices):
        OPEN = "open"
        KEPT_BOTH = "kept_both", "kept both"
        SUPERSEDED = "superseded"
        MERGED = "merged"
        DISMISSED = "dismissed"

    first = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="+")
    second = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=13, choices=Kind.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    explanation = models.TextField(blank=True, default="", help_text=_("the LLM's reason for its judgment"))
    similarity = models.FloatField(default=0, help_text=_("the candidate step's vector similarity (knowledge.neighbours)"))
    detected_for = models.CharField(max_length=40, help_text=_("the item whose save or edit found the pair"))
    model = models.CharField(max_length=200, blank=True, default="", help_text=_("the LLM that judged it; empty: none"))
    resolution = models.JSONField(default=dict, blank=True)
    resolved_by = models.CharField(max_length=200, blank=True, default="")
    resolved_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "-created_at"], name="conflict_status_created")]
        constraints = [
            models.UniqueConstraint(fields=["first", "second"], name="conflict_pair_once"),
            models.CheckConstraint(condition=Q(first__lt=F("second")), name="conflict_pair_ordered"),
            models.CheckConstraint(condition=Q(kind__in=["duplicate", "refinement", "contradiction", "close"]),
                                   name="conflict_kind_known"),
            models.CheckConstraint(condition=Q(status__in=["open", "kept_both", "superseded", "merged", "dismissed"]),
                                   name="conflict_status_known"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.first_id} / {self.second_id} ({self.status})"


class MergeProposal(models.Model):
    """A group of items proposed for one merge, with the proposed text, until a curator decides.

    Made by a dry-run slim job (`job_id`) or by conflict detection judging a pair duplicates (`conflict`).
    `edited` means approved with the curator's own text; `merged_id` is the item the approval made.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        EDITED = "edited", "edited and approved"
        REJECTED = "rejected"

    ids = ArrayField(models.CharField(max_length=40), help_text=_("the items of the group, sorted"))
    task = models.TextField(blank=True, default="")
    content = models.TextField(blank=True, default="")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    job_id = models.UUIDField(null=True, blank=True, help_text=_("the slim job that proposed it"))
    conflict = models.ForeignKey(Conflict, null=True, blank=True, on_delete=models.SET_NULL, related_name="proposals")
    merged_id = models.CharField(max_length=40, blank=True, default="")
    decided_by = models.CharField(max_length=200, blank=True, default="")
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [GinIndex(fields=["ids"], name="merge_proposal_ids_gin")]
        constraints = [
            models.UniqueConstraint(fields=["ids"], condition=Q(status="pending"), name="merge_proposal_pending_once"),
            models.CheckConstraint(condition=Q(status__in=["pending", "approved", "edited", "rejected"]),
                                   name="merge_proposal_status_known"),
        ]

    def __str__(self) -> str:
        return f"{', '.join(self.ids)} ({self.status})"
