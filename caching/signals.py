"""Deletes bypass the actions module (admin bulk delete, team cascade); tell Redis anyway."""

from typing import Any

from django.db.models.signals import post_delete
from django.dispatch import receiver

from caching.actions import forget_cache_policy
from caching.models import CachePolicy


@receiver(post_delete, sender=CachePolicy)
def cache_policy_deleted(sender: type[CachePolicy], instance: CachePolicy, **kwargs: Any) -> None:
    forget_cache_policy(instance)
