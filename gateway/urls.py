from django.contrib import admin
from django.contrib.auth.views import LoginView
from django.urls import include, path

from gateway import health
from gateway.accounts.login_throttle import throttled
from gateway.api.metrics_view import metrics
from gateway.chat.views import chat_page

urlpatterns = [
    path("", chat_page, name="chat"),
    path("chat/api/", include("gateway.chat.urls")),
    # Both sign-in pages limit failed attempts (login_throttle.py); each comes before the
    # include that would otherwise serve it.
    path("accounts/login/", throttled(LoginView.as_view()), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics, name="metrics"),
    path("admin/login/", throttled(admin.site.login)),
    path("admin/", admin.site.urls),
    path("dashboard/", include("gateway.dashboard.urls")),
    path("api/v1/", include("gateway.accounts.api.urls")),
    path("v1/", include("gateway.api.urls")),
]
