"""Tuning writes: validated, applied, audited in one transaction, revertible in one call.

Cache policies go through caching.actions.update_cache_policy, which publishes the
new record to every gateway process after the commit (RecordCache: within 2 seconds).
Autoscale policies are read by the autoscaler from the database on each tick.
"""

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from caching import policy as cache_policy
from caching.actions import update_cache_policy
from caching.models import CachePolicy
from gateway.accounts.models import Team
from gateway.dashboard.models import TuningChange
from inference.models import ModelDeployment
from scaling.models import AutoscalePolicy

AUTOSCALE_FIELDS = [
    "enabled",
    "mode",
    "min_replicas",
    "max_replicas",
    "warm_pool",
    "warm_pool_sleeps",
    "target_utilisation",
    "scale_up_utilisation",
    "scale_up_queue",
    "ttft_p99_target_s",
    "scale_up_window_s",
    "scale_down_utilisation",
    "scale_down_window_s",
    "scale_up_cooldown_s",
    "scale_down_cooldown_s",
    "startup_time_s",
]


class NothingChanged(Exception):
    """Every submitted value equals the current one: nothing is saved or audited."""


def current_cache_values(team: Team | None) -> dict[str, Any]:
    """The values in force for this scope, as policy_for_team resolves them: the team's
    own row, else the global row, else the settings' defaults."""
    in_force = cache_policy.effective_policy(team.pk if team is not None else None)
    return {name: getattr(in_force, name) for name in cache_policy.POLICY_FIELDS}


def _diff(old: dict[str, Any], changes: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    changed = {k: v for k, v in changes.items() if old.get(k) != v}
    if not changed:
        raise NothingChanged("no value differs from the current one")
    return {k: old.get(k) for k in changed}, changed


@transaction.atomic(durable=True)
def change_cache_policy(
    user: User | None,
    team: Team | None,
    changes: dict[str, Any],
    reverts: TuningChange | None = None,
) -> TuningChange:
    """Raises ValidationError (nothing saved) or NothingChanged."""
    in_force = current_cache_values(team)
    old, new = _diff(in_force, changes)
    own_row = CachePolicy.objects.filter(team=team).exists()
    # A scope's first row starts as a copy of what was in force, not of the model defaults.
    update_cache_policy(team.pk if team else None, **(new if own_row else {**in_force, **new}))
    return TuningChange.objects.create(
        user=user, target=TuningChange.Target.CACHE, team=team, old=old, new=new, reverts=reverts
    )


def autoscale_values(row: AutoscalePolicy) -> dict[str, Any]:
    return {name: getattr(row, name) for name in AUTOSCALE_FIELDS}


@transaction.atomic(durable=True)
def change_autoscale_policy(
    user: User | None,
    deployment: ModelDeployment,
    changes: dict[str, Any],
    reverts: TuningChange | None = None,
) -> TuningChange:
    unknown = set(changes) - set(AUTOSCALE_FIELDS)
    if unknown:
        raise ValueError(f"unknown autoscale policy fields: {sorted(unknown)}")
    row, _ = AutoscalePolicy.objects.select_for_update().get_or_create(deployment=deployment)
    old, new = _diff(autoscale_values(row), changes)
    for name, value in new.items():
        setattr(row, name, value)
    row.full_clean()
    row.save()
    return TuningChange.objects.create(
        user=user,
        target=TuningChange.Target.AUTOSCALE,
        deployment=deployment,
        old=old,
        new=new,
        reverts=reverts,
    )


def revert(user: User | None, change: TuningChange) -> TuningChange:
    """Put back the values a change replaced, as a new audited change. Fields changed
    again since are set back too: a revert restores the state before `change`."""
    if change.target == TuningChange.Target.CACHE:
        return change_cache_policy(user, change.team, change.old, reverts=change)
    if change.deployment is None:
        raise ValueError("the deployment of this change no longer exists")
    return change_autoscale_policy(user, change.deployment, change.old, reverts=change)
