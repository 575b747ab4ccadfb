from django.contrib import admin
from django.http import HttpRequest

from gateway.dashboard.models import TuningChange


@admin.register(TuningChange)
class TuningChangeAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Read-only: the audit log is written by the tuning actions, never edited."""

    list_display = ["at", "user", "target", "team", "deployment", "old", "new", "reverts"]
    list_filter = ["target"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
