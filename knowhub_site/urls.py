from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from knowhub_site.health import healthz
from knowhub_site.mcp_port import mcp_elsewhere
from knowhub_site.metrics_endpoint import metrics_view

handler400 = "core.errors.bad_request"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("mcp", mcp_elsewhere, name="mcp-elsewhere"),  # the ASGI process (asgi.py) serves /mcp itself
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/", include("api.urls")),
    path("login/", auth_views.LoginView.as_view(template_name="curation/login.html", redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),  # set_language: the switcher's POST, remembered in a cookie
    path("", include("curation.urls")),
]
