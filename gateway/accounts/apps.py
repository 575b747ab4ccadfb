from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "gateway.accounts"
    label = "accounts"
    verbose_name = "Teams, keys and quotas"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from gateway.accounts import signals  # noqa: F401 - connects the receivers
