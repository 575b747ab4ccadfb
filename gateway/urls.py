from django.contrib import admin
from django.urls import include, path

from gateway import health
from gateway.api.metrics_view import metrics
from gateway.chat.views import chat_page

urlpatterns = [
    path("", chat_page, name="chat"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("dashboard/", include("gateway.dashboard.urls")),
    path("api/v1/", include("gateway.accounts.api.urls")),
    path("v1/", include("gateway.api.urls")),
]
