from typing import Any

from rest_framework import serializers

from gateway.accounts.actions import QUOTA_FIELDS
from gateway.accounts.models import ApiKey, QuotaPolicy


class RejectUnknownFieldsMixin(serializers.Serializer):  # type: ignore[type-arg]
    """DRF drops unknown fields silently; a typo in a limit name must be an error instead."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = set(self.initial_data) - set(self.fields)
        if unknown:
            raise serializers.ValidationError({name: "Unknown field." for name in sorted(unknown)})
        return attrs


class ApiKeySerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    key_prefix = serializers.SerializerMethodField()

    class Meta:
        model = ApiKey
        fields = [
            "lookup_id",
            "key_prefix",
            "name",
            "scopes",
            "allowed_models",
            "requests_per_minute",
            "created_by_key",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
        ]
        read_only_fields = fields

    def get_key_prefix(self, key: ApiKey) -> str:
        return f"sk-sluice-{key.lookup_id}-"


class NewApiKeySerializer(RejectUnknownFieldsMixin):
    name = serializers.CharField(max_length=100, required=False, default="", allow_blank=True)
    expires_in_days = serializers.IntegerField(min_value=1, max_value=3650, required=False)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=ApiKey.Scope.values),
        required=False,
        allow_empty=False,
        default=[ApiKey.Scope.INFERENCE.value],
    )
    allowed_models = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, default=list, max_length=100
    )
    requests_per_minute = serializers.IntegerField(min_value=0, required=False, allow_null=True)


class QuotaPolicySerializer(RejectUnknownFieldsMixin, serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = QuotaPolicy
        fields = [*QUOTA_FIELDS, "updated_at"]
        read_only_fields = ["updated_at"]
        extra_kwargs = {
            "budget_per_month_usd": {"min_value": 0},
            "max_tokens_cap": {"min_value": 1},
            "queue_weight": {"min_value": 1},
            "max_concurrent_requests": {"min_value": 1},
        }
