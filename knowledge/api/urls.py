from django.urls import path

from knowledge.api import views
from jobs.api import JobDetailApi
from resources.api import ResourceCollectionApi, ResourceDetailApi

urlpatterns = [
    path("knowledge/search", views.KnowledgeSearchApi.as_view(), name="knowledge-search"),
    path("knowledge/batch_update", views.KnowledgeBatchUpdateApi.as_view(), name="knowledge-batch-update"),
    path("knowledge/slim", views.KnowledgeSlimApi.as_view(), name="knowledge-slim"),
    path("knowledge/filters", views.KnowledgeFiltersApi.as_view(), name="knowledge-filters"),
    path("knowledge", views.KnowledgeCollectionApi.as_view(), name="knowledge-collection"),
    path("knowledge/<str:knowledge_id>", views.KnowledgeDetailApi.as_view(), name="knowledge-detail"),
    path("jobs/<uuid:job_id>", JobDetailApi.as_view(), name="job-detail"),
    path("resource", ResourceCollectionApi.as_view(), name="resource-collection"),
    path("resource/<path:resource_id>", ResourceDetailApi.as_view(), name="resource-detail"),
]
