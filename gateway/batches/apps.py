from django.apps import AppConfig


class BatchesConfig(AppConfig):
    name = "gateway.batches"
    label = "batches"
    verbose_name = "Batch API"
    default_auto_field = "django.db.models.BigAutoField"
