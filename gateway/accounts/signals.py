"""Deletes bypass the actions module (admin bulk delete, team cascade); tell Redis anyway."""

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from gateway.accounts.actions import forget_deleted_key
from gateway.accounts.models import ApiKey, QuotaPolicy
from gateway.accounts.records import team_limits


@receiver(post_delete, sender=ApiKey)
def key_deleted(sender: type[ApiKey], instance: ApiKey, **kwargs: Any) -> None:
    transaction.on_commit(lambda: forget_deleted_key(instance))


@receiver(post_delete, sender=QuotaPolicy)
def policy_deleted(sender: type[QuotaPolicy], instance: QuotaPolicy, **kwargs: Any) -> None:
    """The team follows the platform default from now on, in every process."""
    transaction.on_commit(lambda: team_limits.publish(str(instance.team_id), None))
