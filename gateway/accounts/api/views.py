"""Management API: a team's admins manage its keys and quota and read its usage."""

from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from django.utils import timezone
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts import actions
from gateway.accounts.api.authentication import KeyPrincipal, ServiceUnavailable
from gateway.accounts.api.serializers import (
    ApiKeySerializer,
    NewApiKeySerializer,
    QuotaPolicySerializer,
)
from gateway.accounts.key_bounds import BroaderThanCreator, KeyRequest, bounded_by_creator
from gateway.accounts.models import ApiKey, DefaultQuotaPolicy, Membership, QuotaPolicy, Team
from gateway.accounts.quota_usage import read_team_usage
from gateway.accounts.quotas import AdmissionUnavailable
from gateway.accounts.records import effective_limits
from gateway.list_pages import BadPage, list_body, page

# What staff need to act on a team they are not an admin of: the admin site's permissions.
VIEW_KEYS = "accounts.view_apikey"
ADD_KEY = "accounts.add_apikey"
CHANGE_KEY = "accounts.change_apikey"
VIEW_QUOTA = "accounts.view_quotapolicy"
CHANGE_QUOTA = "accounts.change_quotapolicy"
VIEW_USAGE = "usage.view_usagerecord"
KEY_PAGE_MOST = 100


def team_for_admin(request: Request, slug: str, staff_permission: str) -> Team:
    """The team in the URL, if the caller administers it; 404 hides other teams.

    Platform staff manage every team, each action with the model permission the admin
    site asks for the same action (staff_permission, "accounts.add_apikey" say): a staff
    account that may only read dashboards mints no key and lifts no limit here either."""
    team = get_object_or_404(Team, slug=slug)
    user = request.user
    if isinstance(user, KeyPrincipal):
        if user.team_id != team.pk:
            raise exceptions.NotFound()
        return team
    if user.pk is None:
        raise exceptions.NotAuthenticated()
    if has_staff_permission(request, staff_permission):
        return team
    memberships = Membership.objects.filter(team=team, user_id=user.pk)
    role = memberships.values_list("role", flat=True).first()
    if role is None and getattr(user, "is_staff", False):
        raise exceptions.PermissionDenied(
            f"Managing another team needs the {staff_permission!r} permission."
        )
    if role is None:
        raise exceptions.NotFound()
    if role != Membership.Role.ADMIN:
        raise exceptions.PermissionDenied("Only the team's admins may manage it.")
    return team


def has_staff_permission(request: Request, permission: str) -> bool:
    user = request.user
    return bool(getattr(user, "is_staff", False) and user.has_perm(permission))


def _as_api_error(exc: DjangoValidationError) -> exceptions.ValidationError:
    detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
    return exceptions.ValidationError(detail)


class ApiKeyListView(APIView):
    def get(self, request: Request, slug: str) -> Response:
        """A page of the team's keys, newest first, revoked ones included (`?limit=` up to
        KEY_PAGE_MOST, `?after=<lookup_id>` for the next)."""
        team = team_for_admin(request, slug, VIEW_KEYS)
        params = request.query_params
        try:
            found, more = page(
                team.api_keys.all(), params.get("after"), params.get("limit"),
                KEY_PAGE_MOST, "lookup_id",
            )  # fmt: skip
        except BadPage as exc:
            raise exceptions.ValidationError({exc.param: str(exc)}) from None
        keys = [dict(ApiKeySerializer(key).data) for key in found]
        return Response(list_body(keys, more, "lookup_id"))

    def post(self, request: Request, slug: str) -> Response:
        team = team_for_admin(request, slug, ADD_KEY)
        form = NewApiKeySerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data: dict[str, Any] = form.validated_data
        days = data.get("expires_in_days")
        wanted = KeyRequest(
            scopes=tuple(data["scopes"]),
            allowed_models=tuple(data["allowed_models"]),
            expires_at=None if days is None else timezone.now() + timedelta(days=days),
            requests_per_minute=data.get("requests_per_minute"),
        )
        principal = request.user if isinstance(request.user, KeyPrincipal) else None
        if principal is not None:
            try:
                wanted = bounded_by_creator(principal.key, wanted)
            except BroaderThanCreator as exc:
                raise exceptions.PermissionDenied({exc.field: str(exc)}) from None
        try:
            issued = actions.issue_api_key(
                team,
                name=data["name"],
                expires_at=wanted.expires_at,
                scopes=wanted.scopes,
                allowed_models=wanted.allowed_models,
                requests_per_minute=wanted.requests_per_minute,
                created_by=None if principal is not None else request.user,  # type: ignore[arg-type]
                created_by_key=principal.key.lookup_id if principal is not None else "",
            )
        except DjangoValidationError as exc:
            raise _as_api_error(exc) from None
        body = {**ApiKeySerializer(issued.key).data, "key": issued.plaintext}
        return Response(body, status=status.HTTP_201_CREATED)


class ApiKeyRevokeView(APIView):
    def post(self, request: Request, slug: str, lookup_id: str) -> Response:
        team = team_for_admin(request, slug, CHANGE_KEY)
        key = get_object_or_404(ApiKey, team=team, lookup_id=lookup_id)
        cascade = request.query_params.get("with_keys_it_made", "")
        if cascade not in ("", "true", "false"):
            raise exceptions.ValidationError({"with_keys_it_made": "Must be true or false."})
        if cascade != "true":
            return Response(ApiKeySerializer(actions.revoke_api_key(key)).data)
        revoked = actions.revoke_api_key_and_its_keys(key)
        body = ApiKeySerializer(revoked[0]).data
        body["also_revoked"] = [k.lookup_id for k in revoked[1:]]
        return Response(body)


def _quota_body(team: Team) -> dict[str, Any]:
    """The limits that govern the team, and whose they are: "team" (its own policy) or
    "default" (it has none and follows the platform default)."""
    own = QuotaPolicy.objects.filter(team=team).first()
    policy = own if own is not None else DefaultQuotaPolicy.load()
    return {**QuotaPolicySerializer(policy).data, "source": "default" if own is None else "team"}


def _staff_only(request: Request) -> None:
    if not has_staff_permission(request, CHANGE_QUOTA):
        # A team must not lift its own limits (nor may a leaked manage key).
        raise exceptions.PermissionDenied(
            f"Only platform staff with the {CHANGE_QUOTA!r} permission may change a team's quota."
        )


class QuotaPolicyView(APIView):
    def get(self, request: Request, slug: str) -> Response:
        return Response(_quota_body(team_for_admin(request, slug, VIEW_QUOTA)))

    def patch(self, request: Request, slug: str) -> Response:
        """Change some limits; a team on the default gets its own policy (the default's
        limits, with these changes)."""
        team = team_for_admin(request, slug, CHANGE_QUOTA)
        _staff_only(request)
        form = QuotaPolicySerializer(data=request.data, partial=True)
        form.is_valid(raise_exception=True)
        try:
            actions.update_quota_policy(team, **form.validated_data)
        except DjangoValidationError as exc:
            raise _as_api_error(exc) from None
        return Response(_quota_body(team))

    def delete(self, request: Request, slug: str) -> Response:
        """Drop the team's own policy: it follows the platform default again."""
        team = team_for_admin(request, slug, CHANGE_QUOTA)
        _staff_only(request)
        actions.use_default_quota(team)
        return Response(_quota_body(team))


class UsageView(APIView):
    def get(self, request: Request, slug: str) -> Response:
        team = team_for_admin(request, slug, VIEW_USAGE)
        limits = effective_limits(team.pk)
        try:
            usage = read_team_usage(team.pk, limits)
        except AdmissionUnavailable as exc:
            raise ServiceUnavailable(str(exc)) from None
        return Response(
            {
                "team": team.slug,
                "limits": [item.as_dict() for item in usage],
            }
        )
