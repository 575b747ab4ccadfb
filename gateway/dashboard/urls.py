from django.urls import path

from gateway.dashboard import tuning_views, views

app_name = "dashboard"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("costs/", views.cost_page, name="costs"),
    path("costs.csv", views.cost_csv, name="costs_csv"),
    path("teams/", views.teams, name="teams"),
    path("fleet/", views.fleet, name="fleet"),
    path("batches/", views.batches, name="batches"),
    path("tuning/", tuning_views.tuning, name="tuning"),
    path("tuning/revert/<int:pk>/", tuning_views.revert, name="revert"),
]
