from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "gateway.usage"
    label = "usage"
    verbose_name = "Usage ledger"
    default_auto_field = "django.db.models.BigAutoField"
