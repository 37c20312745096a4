from django.urls import path

from curation.views import (
    audit, conflicts, dashboard, documents, evolve, knowledge, playground, resources, review, versions, webhooks,
)

app_name = "curation"

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("ranking/", dashboard.dashboard_ranking, name="dashboard_ranking"),
    path("knowledge/", knowledge.knowledge_list, name="knowledge_list"),
    path("knowledge/<str:knowledge_id>/", knowledge.knowledge_detail, name="knowledge_detail"),
    path("knowledge/<str:knowledge_id>/edit/", knowledge.knowledge_edit, name="knowledge_edit"),
    path("knowledge/<str:knowledge_id>/feedback/", knowledge.knowledge_feedback, name="knowledge_feedback"),
    path("knowledge/<str:knowledge_id>/score/", knowledge.knowledge_score, name="knowledge_score"),
    path("knowledge/<str:knowledge_id>/explain/", knowledge.knowledge_explain, name="knowledge_explain"),
    path("knowledge/<str:knowledge_id>/reports/<str:kind>/", knowledge.knowledge_reports, name="knowledge_reports"),
    path("knowledge/<str:knowledge_id>/diff/", versions.version_diff, name="version_diff"),
    path("knowledge/<str:knowledge_id>/restore/<int:number>/", versions.version_restore, name="version_restore"),
    path("knowledge/<str:knowledge_id>/unmerge/", review.unmerge, name="unmerge"),
    path("knowledge/<str:knowledge_id>/activate/", conflicts.activate, name="knowledge_activate"),
    path("knowledge/<str:knowledge_id>/evolve/", evolve.evolve_start, name="evolve_start"),
    path("jobs/<uuid:job_id>/", evolve.job_status, name="job_status"),
    path("jobs/<uuid:job_id>/rollback/", evolve.evolve_rollback, name="evolve_rollback"),
    path("jobs/<uuid:job_id>/accept/", evolve.evolve_accept, name="evolve_accept"),
    path("jobs/<uuid:job_id>/reject/", evolve.evolve_reject, name="evolve_reject"),
    path("review/", review.review, name="review"),
    path("conflicts/", conflicts.conflicts, name="conflicts"),
    path("conflicts/<int:conflict_id>/resolve/", conflicts.resolve, name="conflict_resolve"),
    path("conflicts/<int:conflict_id>/reopen/", conflicts.reopen, name="conflict_reopen"),
    path("review/find/", review.find_duplicates, name="review_find"),
    path("review/approve/", review.approve, name="review_approve"),
    path("review/reject/", review.reject, name="review_reject"),
    path("resources/", resources.resource_list, name="resource_list"),
    # One URL per resource, whatever its id (ids hold '/' and may end in "/reveal"): GET shows it, POST reveals
    path("resources/<path:resource_id>/", resources.resource_page, name="resource_detail"),
    path("documents/", documents.documents, name="documents"),
    path("documents/upload/", documents.document_upload, name="document_upload"),
    path("documents/import/", documents.document_import, name="document_import"),
    path("documents/<uuid:document_id>/", documents.document_detail, name="document_detail"),
    path("webhooks/", webhooks.webhooks, name="webhooks"),
    path("webhooks/subscribe/", webhooks.webhook_subscribe, name="webhook_subscribe"),
    path("webhooks/<uuid:webhook_id>/pause/", webhooks.webhook_pause, name="webhook_pause"),
    path("webhooks/<uuid:webhook_id>/resume/", webhooks.webhook_resume, name="webhook_resume"),
    path("webhooks/<uuid:webhook_id>/delete/", webhooks.webhook_delete, name="webhook_delete"),
    path("webhooks/<uuid:webhook_id>/secret/", webhooks.webhook_secret, name="webhook_secret"),
    path("webhooks/<uuid:webhook_id>/deliveries/<uuid:delivery_id>/resend/", webhooks.webhook_resend,
         name="webhook_resend"),
    path("playground/", playground.playground, name="playground"),
    path("audit/", audit.audit, name="audit"),
]
