from django.urls import path

from gateway.accounts.api import views
from gateway.accounts.api.cache_views import TeamCacheView

urlpatterns = [
    path("teams/<slug:slug>/keys/", views.ApiKeyListView.as_view(), name="api-keys"),
    path(
        "teams/<slug:slug>/keys/<str:lookup_id>/revoke/",
        views.ApiKeyRevokeView.as_view(),
        name="api-key-revoke",
    ),
    path("teams/<slug:slug>/quota/", views.QuotaPolicyView.as_view(), name="api-quota"),
    path("teams/<slug:slug>/usage/", views.UsageView.as_view(), name="api-usage"),
    path("teams/<slug:slug>/cache/", TeamCacheView.as_view(), name="api-cache"),
]
