from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from caching.actions import publish_saved_policy
from caching.models import CachePolicy
from caching.policy import POLICY_FIELDS


@admin.register(CachePolicy)
class CachePolicyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["__str__", *POLICY_FIELDS]
    autocomplete_fields = ["team"]

    def save_model(self, request: HttpRequest, obj: CachePolicy, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        publish_saved_policy(obj)  # every process within 2 s
