from django.contrib import admin
from django.http import HttpRequest

from gateway.usage.models import UsageRecord


@admin.register(UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = [
        "request_id",
        "team",
        "model",
        "status",
        "prompt_tokens",
        "completion_tokens",
        "cost_micros",
        "created_at",
    ]
    list_filter = ["status", "model", "team"]
    search_fields = ["request_id"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: UsageRecord | None = None) -> bool:
        return False
