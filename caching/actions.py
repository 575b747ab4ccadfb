"""Writes to cache policies: validated, saved, then published to every process."""

import logging
from typing import Any

from django.db import transaction

from caching import policy
from caching.models import CachePolicy

logger = logging.getLogger(__name__)


@transaction.atomic
def update_cache_policy(team_id: int | None, **changes: Any) -> CachePolicy:
    """Change a team's policy (team_id None: the global default), creating it if needed."""
    unknown = set(changes) - set(policy.POLICY_FIELDS)
    if unknown:
        raise ValueError(f"unknown cache policy fields: {sorted(unknown)}")
    row, _ = CachePolicy.objects.select_for_update().get_or_create(team_id=team_id)
    for name, value in changes.items():
        setattr(row, name, value)
    row.full_clean()
    row.save()
    publish_saved_policy(row)
    logger.info("changed %s: %s", row, changes)
    return row


def publish_saved_policy(row: CachePolicy) -> None:
    team_id = row.team_id
    transaction.on_commit(lambda: policy.publish(row, team_id))


def forget_cache_policy_of(team_id: int | None) -> None:
    """The team (None: the global default) has no policy row any more: say so, once the
    transaction commits."""
    transaction.on_commit(lambda: policy.publish(None, team_id))


def forget_cache_policy(row: CachePolicy) -> None:
    team_id = row.team_id
    transaction.on_commit(lambda: policy.publish(None, team_id))
    logger.info("deleted %s; the default applies", row)
