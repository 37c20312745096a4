from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from knowhub_site.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/", include("knowledge.api.urls")),
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False), name="home"),
]
