from django.contrib import admin

from inference.models import ModelDeployment, Worker


class WorkerInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Worker
    extra = 0
    fields = ["url", "state", "labels", "registered_by"]


@admin.register(ModelDeployment)
class ModelDeploymentAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = [
        "name",
        "kind",
        "tier",
        "price_input_per_million",
        "price_output_per_million",
        "gpu_cost_per_hour",
        "max_in_flight_per_worker",
        "routing_policy",
        "accepts_images",
    ]
    inlines = [WorkerInline]


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["url", "deployment", "state", "labels", "registered_by", "state_changed_at"]
    list_filter = ["state", "deployment"]
