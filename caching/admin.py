from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from caching.actions import forget_cache_policy_of, publish_saved_policy
from caching.models import CachePolicy
from caching.policy import POLICY_FIELDS


@admin.register(CachePolicy)
class CachePolicyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["__str__", *POLICY_FIELDS]
    autocomplete_fields = ["team"]

    def save_model(self, request: HttpRequest, obj: CachePolicy, form: Any, change: bool) -> None:
        moved_from = form.initial.get("team") if change and "team" in form.changed_data else None
        super().save_model(request, obj, form, change)
        publish_saved_policy(obj)  # every process within 2 s
        if change and "team" in form.changed_data:
            # The row left a team (or the global default): the one it left falls back to
            # the default now, not when its published record expires.
            forget_cache_policy_of(moved_from)
