from django.urls import path, re_path, register_converter

from api import curation_views as curation
from api import conflicts
from api import views
from core.errors import api_not_found
from api.jobs import JobDetailApi
from api.resources import ResourceCollectionApi, ResourceDetailApi
from api.documents import DocumentCollectionApi, DocumentDetailApi
from api.transfer import ExportApi, ImportApi
from api.webhooks import WebhookCollectionApi, WebhookDetailApi, WebhookResendApi


class SegmentConverter:
    """One path segment without NUL (which PostgreSQL refuses): `/api/knowledge/%00` is a JSON 404."""

    regex = "[^/\x00]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class PathConverter(SegmentConverter):
    regex = "[^\x00]+"


register_converter(SegmentConverter, "segment")
register_converter(PathConverter, "nulfree_path")

urlpatterns = [
    path("knowledge/search", views.KnowledgeSearchApi.as_view(), name="knowledge-search"),
    path("knowledge/batch_update", views.KnowledgeBatchUpdateApi.as_view(), name="knowledge-batch-update"),
    path("knowledge/slim", views.KnowledgeSlimApi.as_view(), name="knowledge-slim"),
    path("knowledge/bulk", views.KnowledgeBulkApi.as_view(), name="knowledge-bulk"),
    path("knowledge/filters", views.KnowledgeFiltersApi.as_view(), name="knowledge-filters"),
    path("knowledge", views.KnowledgeCollectionApi.as_view(), name="knowledge-collection"),
    path("knowledge/<segment:knowledge_id>", views.KnowledgeDetailApi.as_view(), name="knowledge-detail"),
    path("knowledge/<segment:knowledge_id>/versions", curation.KnowledgeVersionsApi.as_view(), name="knowledge-versions"),
    path("knowledge/<segment:knowledge_id>/restore", curation.KnowledgeRestoreApi.as_view(), name="knowledge-restore"),
    path("knowledge/<segment:knowledge_id>/archive", curation.KnowledgeArchiveApi.as_view(), name="knowledge-archive"),
    path("knowledge/<segment:knowledge_id>/activate", curation.KnowledgeActivateApi.as_view(), name="knowledge-activate"),
    path("knowledge/<segment:knowledge_id>/unmerge", curation.KnowledgeUnmergeApi.as_view(), name="knowledge-unmerge"),
    path("knowledge/<segment:knowledge_id>/supersede", conflicts.KnowledgeSupersedeApi.as_view(), name="knowledge-supersede"),
    path("conflicts", conflicts.ConflictCollectionApi.as_view(), name="conflict-collection"),
    path("conflicts/<segment:conflict_id>", conflicts.ConflictDetailApi.as_view(), name="conflict-detail"),
    path("conflicts/<segment:conflict_id>/resolve", conflicts.ConflictResolveApi.as_view(), name="conflict-resolve"),
    path("conflicts/<segment:conflict_id>/reopen", conflicts.ConflictReopenApi.as_view(), name="conflict-reopen"),
    path("merges", curation.MergeProposalsApi.as_view(), name="merge-proposals"),
    path("merges/approve", curation.MergeApproveApi.as_view(), name="merge-approve"),
    path("merges/reject", curation.MergeRejectApi.as_view(), name="merge-reject"),
    path("jobs/<uuid:job_id>", JobDetailApi.as_view(), name="job-detail"),
    path("jobs/<uuid:job_id>/rollback", curation.EvolveRollbackApi.as_view(), name="evolve-rollback"),
    path("jobs/<uuid:job_id>/accept", conflicts.EvolveAcceptApi.as_view(), name="evolve-accept"),
    path("jobs/<uuid:job_id>/reject", conflicts.EvolveRejectApi.as_view(), name="evolve-reject"),
    path("documents", DocumentCollectionApi.as_view(), name="document-collection"),
    path("documents/<segment:document_id>", DocumentDetailApi.as_view(), name="document-detail"),
    path("export", ExportApi.as_view(), name="export"),
    path("import", ImportApi.as_view(), name="import"),
    path("webhooks", WebhookCollectionApi.as_view(), name="webhook-collection"),
    path("webhooks/<segment:webhook_id>", WebhookDetailApi.as_view(), name="webhook-detail"),
    path("webhooks/<segment:webhook_id>/deliveries/<segment:delivery_id>/resend", WebhookResendApi.as_view(),
         name="webhook-resend"),
    path("resource", ResourceCollectionApi.as_view(), name="resource-collection"),
    path("resource/<nulfree_path:resource_id>", ResourceDetailApi.as_view(), name="resource-detail"),
    # Last: any other /api/ path is a JSON 404 (/api/schema and /api/docs keep their slash redirect).
    re_path(r"^(?!(?:schema|docs)$).*$", api_not_found, name="api-not-found"),
]
