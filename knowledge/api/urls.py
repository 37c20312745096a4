from django.urls import path

from knowledge.api import views

urlpatterns = [
    path("knowledge/search", views.KnowledgeSearchApi.as_view(), name="knowledge-search"),
    path("knowledge/batch_update", views.KnowledgeBatchUpdateApi.as_view(), name="knowledge-batch-update"),
    path("knowledge/filters", views.KnowledgeFiltersApi.as_view(), name="knowledge-filters"),
    path("knowledge", views.KnowledgeCollectionApi.as_view(), name="knowledge-collection"),
    path("knowledge/<str:knowledge_id>", views.KnowledgeDetailApi.as_view(), name="knowledge-detail"),
]
