from django.apps import AppConfig


class ScalingConfig(AppConfig):
    name = "scaling"
    label = "scaling"
    verbose_name = "Routing and autoscaling"
    default_auto_field = "django.db.models.BigAutoField"
