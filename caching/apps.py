from django.apps import AppConfig


class CacheConfig(AppConfig):
    name = "caching"
    label = "caching"
    verbose_name = "Response caches"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from caching import signals  # noqa: F401 - connects the receivers
