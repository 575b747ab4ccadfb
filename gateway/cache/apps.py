from django.apps import AppConfig


class CacheConfig(AppConfig):
    name = "gateway.cache"
    label = "caching"
    verbose_name = "Response caches"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from gateway.cache import signals  # noqa: F401 - connects the receivers
