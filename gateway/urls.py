from django.contrib import admin
from django.contrib.auth.views import (
    LoginView,
    LogoutView,
    PasswordChangeDoneView,
    PasswordChangeView,
)
from django.urls import include, path

from gateway import health
from gateway.accounts.login_throttle import signed_in, throttled
from gateway.api.metrics_view import metrics
from gateway.chat.views import chat_page

urlpatterns = [
    path("", chat_page, name="chat"),
    path("chat/api/", include("gateway.chat.urls")),
    # Both sign-in pages limit failed attempts (login_throttle.py); each comes before the
    # include that would otherwise serve it.
    path("accounts/login/", throttled(LoginView.as_view()), name="login"),
    # Of django.contrib.auth's pages, those the site uses. No password reset: it mails a
    # link, and the platform sends no mail (an administrator resets a password).
    path("accounts/logout/", LogoutView.as_view(), name="logout"),
    path(
        "accounts/password_change/",
        throttled(PasswordChangeView.as_view(), signed_in),
        name="password_change",
    ),
    path(
        "accounts/password_change/done/",
        PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics, name="metrics"),
    path("admin/login/", throttled(admin.site.login)),
    path(
        "admin/password_change/",
        # The admin's check first: a non-staff session is sent to the admin's login by it,
        # and that redirect must not reach the throttle, which reads it as a success.
        admin.site.admin_view(throttled(admin.site.password_change, signed_in)),
    ),
    path("admin/", admin.site.urls),
    path("dashboard/", include("gateway.dashboard.urls")),
    path("api/v1/", include("gateway.accounts.api.urls")),
    path("v1/", include("gateway.api.urls")),
]
