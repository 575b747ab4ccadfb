from django.contrib import admin

from inference.models import GpuRate, ModelDeployment, Worker


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
        "batch_discount_percent",
        "spot_discount_percent",
        "max_in_flight_per_worker",
        "routing_policy",
        "accepts_images",
    ]
    inlines = [WorkerInline]


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["url", "deployment", "state", "labels", "registered_by", "state_changed_at"]
    list_filter = ["state", "deployment"]


@admin.register(GpuRate)
class GpuRateAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Hourly cost of a worker by its `gpu` label; the fleet sampler reads it each minute."""

    list_display = ["gpu", "on_demand_per_hour", "spot_per_hour", "is_example"]
