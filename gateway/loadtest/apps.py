from django.apps import AppConfig


class LoadtestConfig(AppConfig):
    name = "gateway.loadtest"
    label = "loadtest"
    verbose_name = "Load benchmark"
