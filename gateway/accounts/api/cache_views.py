"""Management API for a team's caching: its counters and policy (GET), and, for platform
staff, changes to its policy (PATCH), live in every process within 2 seconds."""

from dataclasses import asdict

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from caching import stats
from caching.actions import update_cache_policy
from caching.models import CachePolicy
from caching.policy import POLICY_FIELDS, effective_policy
from foundation.redis_clients import REDIS_FAILURES
from gateway.accounts.api.authentication import ServiceUnavailable
from gateway.accounts.api.views import has_staff_permission, team_for_admin


class CachePolicySerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = CachePolicy
        fields = POLICY_FIELDS


CHANGE_CACHE_POLICY = "caching.change_cachepolicy"


class TeamCacheView(APIView):
    def get(self, request: Request, slug: str) -> Response:
        team = team_for_admin(request, slug, "caching.view_cachepolicy")
        try:
            counters = stats.read(team.pk)
        except REDIS_FAILURES as exc:
            raise ServiceUnavailable(f"The cache's Redis is unreachable: {exc}") from None
        return Response(
            {"team": team.slug, "policy": self._effective(team.pk), "counters": counters}
        )

    def patch(self, request: Request, slug: str) -> Response:
        team = team_for_admin(request, slug, CHANGE_CACHE_POLICY)
        if not has_staff_permission(request, CHANGE_CACHE_POLICY):
            raise exceptions.PermissionDenied(
                f"Only platform staff with the {CHANGE_CACHE_POLICY!r} permission may change "
                "cache policies."
            )
        form = CachePolicySerializer(data=request.data, partial=True)
        form.is_valid(raise_exception=True)
        try:
            update_cache_policy(team.pk, **form.validated_data)
        except DjangoValidationError as exc:
            raise exceptions.ValidationError(exc.message_dict) from None
        return Response({"team": team.slug, "policy": self._effective(team.pk)})

    @staticmethod
    def _effective(team_id: int) -> dict[str, object]:
        return asdict(effective_policy(team_id))
