from django.apps import AppConfig


class BenchConfig(AppConfig):
    """Every benchmark command and its data: instruments, not product code."""

    name = "bench"
    label = "bench"
    verbose_name = "Benchmarks"
