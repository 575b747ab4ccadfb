"""Deletes bypass the actions module (admin bulk delete, team cascade); tell Redis anyway."""

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from gateway.accounts.actions import forget_deleted_key
from gateway.accounts.models import ApiKey


@receiver(post_delete, sender=ApiKey)
def key_deleted(sender: type[ApiKey], instance: ApiKey, **kwargs: Any) -> None:
    transaction.on_commit(lambda: forget_deleted_key(instance))
