"""Staff users for the dashboard tests."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission, User

TUNING_PERMISSIONS = ("change_cachepolicy", "change_autoscalepolicy")


def tuning_staff(username: str = "ops") -> User:
    """A staff user who may change cache and autoscale policies (not a superuser)."""
    user: User = get_user_model().objects.create_user(username, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=TUNING_PERMISSIONS))
    return user
