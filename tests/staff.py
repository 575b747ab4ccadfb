"""Staff users for the dashboard and management API tests: staff act on a team they are not
an admin of only with the admin site's model permission for each action."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission, User
from django.db.models import Q

from gateway.accounts.api.cache_views import CHANGE_CACHE_POLICY
from gateway.accounts.api.views import (
    ADD_KEY,
    CHANGE_KEY,
    CHANGE_QUOTA,
    VIEW_KEYS,
    VIEW_QUOTA,
    VIEW_USAGE,
)

TUNING_PERMISSIONS = ("change_cachepolicy", "change_autoscalepolicy")
TEAM_FIGURES = ("view_usagerecord", "view_batch")  # the dashboards' pages that name teams
EVERY_TEAM_ACTION = (
    VIEW_KEYS,
    ADD_KEY,
    CHANGE_KEY,
    VIEW_QUOTA,
    CHANGE_QUOTA,
    VIEW_USAGE,
    "caching.view_cachepolicy",
    CHANGE_CACHE_POLICY,
)


def tuning_staff(username: str = "ops") -> User:
    """A staff user who may change cache and autoscale policies and read every dashboard
    page (not a superuser)."""
    user: User = get_user_model().objects.create_user(username, is_staff=True)
    wanted = (*TUNING_PERMISSIONS, *TEAM_FIGURES)
    user.user_permissions.add(*Permission.objects.filter(codename__in=wanted))
    return user


def staff_user(username: str, *permissions: str) -> User:
    """A staff account holding permissions ("app_label.codename"), not a superuser."""
    user: User = get_user_model().objects.create_user(username, is_staff=True)
    wanted = Q(pk__in=[])
    for permission in permissions:
        app_label, codename = permission.split(".")
        wanted |= Q(content_type__app_label=app_label, codename=codename)
    user.user_permissions.add(*Permission.objects.filter(wanted))
    return user
