from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from scaling.models import AutoscalePolicy, ScalingDecision


@admin.register(AutoscalePolicy)
class AutoscalePolicyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = [
        "deployment",
        "enabled",
        "mode",
        "min_replicas",
        "max_replicas",
        "warm_pool",
        "scale_up_utilisation",
        "scale_down_utilisation",
        "ttft_p99_target_s",
        "allow_spot",
        "updated_at",
    ]
    list_filter = ["enabled", "mode"]
    fieldsets = [
        (None, {"fields": ["deployment", "enabled", "mode"]}),
        (
            "Replicas",
            {
                "fields": [
                    "min_replicas",
                    "max_replicas",
                    "warm_pool",
                    "warm_pool_sleeps",
                    "allow_spot",
                    "startup_time_s",
                ]
            },
        ),
        (
            "Scale up",
            {
                "fields": [
                    "scale_up_utilisation",
                    "scale_up_queue",
                    "ttft_p99_target_s",
                    "scale_up_window_s",
                    "scale_up_cooldown_s",
                ]
            },
        ),
        (
            "Scale down",
            {"fields": ["scale_down_utilisation", "scale_down_window_s", "scale_down_cooldown_s"]},
        ),
        ("Sizing", {"fields": ["target_utilisation"]}),
    ]


@admin.register(ScalingDecision)
class ScalingDecisionAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The autoscaler's diary: read-only, written only by the loop."""

    list_display = [
        "at",
        "deployment",
        "action",
        "from_replicas",
        "to_replicas",
        "rule",
        "actuated",
        "short_reason",
    ]
    list_filter = ["action", "deployment", "actuated"]
    date_hierarchy = "at"
    search_fields = ["reason", "rule"]

    @admin.display(description="reason")
    def short_reason(self, obj: ScalingDecision) -> str:
        return obj.reason if len(obj.reason) <= 120 else obj.reason[:117] + "..."

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
