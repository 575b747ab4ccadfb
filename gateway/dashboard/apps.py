from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "gateway.dashboard"
    label = "dashboard"
    verbose_name = "Dashboard"
