"""Tuning forms: ModelForms so the models' validators and clean() run before anything is
saved (the actions run full_clean again inside the transaction)."""

from typing import Any

from django import forms

from caching.models import CachePolicy
from gateway.dashboard.actions import AUTOSCALE_FIELDS
from scaling.models import AutoscalePolicy

CACHE_FIELDS = [
    "exact_enabled",
    "semantic_enabled",
    "exact_ttl_s",
    "semantic_ttl_s",
    "max_age_s",
    "similarity_threshold",
    "max_false_hit_rate",
    "audit_rate",
    "verify_enabled",
    "max_entry_bytes",
    "memory_budget_bytes",
]


class CachePolicyForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = CachePolicy
        fields = CACHE_FIELDS


class AutoscalePolicyForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = AutoscalePolicy
        fields = AUTOSCALE_FIELDS


def changed_values(form: Any) -> dict[str, Any]:
    """The submitted values of a valid form (the action keeps only those that differ)."""
    return {name: form.cleaned_data[name] for name in form.Meta.fields}
