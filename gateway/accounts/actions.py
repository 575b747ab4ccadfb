"""Every write to teams, keys and quotas goes through these functions.

They validate, write the database, then publish the new record to Redis so every gateway
process sees it within AUTH_PROCESS_CACHE_TTL_S. Views, commands and the admin stay thin.
Their transactions are not durable: Django's admin saves inside its own transaction, and
publishing inside ours is the intent (a revocation Redis could not hear rolls back).
The dashboard's actions, which no caller wraps, are durable.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Field
from django.utils import timezone
from django.utils.text import slugify

from gateway.accounts.keys import new_key
from gateway.accounts.models import ApiKey, DefaultQuotaPolicy, Membership, QuotaPolicy, Team
from gateway.accounts.records import (
    DEFAULT_LIMITS_ID,
    key_record_from_row,
    key_records,
    quota_limits_from_row,
    team_limits,
)

logger = logging.getLogger(__name__)

QUOTA_FIELDS = (
    "requests_per_minute",
    "tokens_per_minute",
    "tokens_per_month",
    "budget_per_month_usd",
    "max_tokens_cap",
    "queue_weight",
    "max_concurrent_requests",
    "max_batch_queue_tokens",
)
# Every limit a policy can leave empty, set to "no limit": create_team(name, **NO_LIMITS)
# makes a team deliberately unlimited (its own policy, so the default does not apply).
NO_LIMITS: dict[str, None] = {
    name: None
    for name in QUOTA_FIELDS
    if isinstance(field := QuotaPolicy._meta.get_field(name), Field) and field.null
}
DEFAULT_SCOPES = (ApiKey.Scope.INFERENCE.value,)


@dataclass(frozen=True)
class IssuedKey:
    """A new key; `plaintext` exists only here and is never stored."""

    key: ApiKey
    plaintext: str


def _check_limits(limits: dict[str, Any]) -> None:
    unknown = set(limits) - set(QUOTA_FIELDS)
    if unknown:
        raise ValidationError(f"Unknown quota field(s): {', '.join(sorted(unknown))}.")
    for name, value in limits.items():
        if value is not None and value < 0:
            raise ValidationError({name: f"{name} must be zero or more, not {value}."})


def default_policy_values() -> dict[str, Any]:
    """The platform default's current limits, by field (what a team's own policy starts as)."""
    policy = DefaultQuotaPolicy.load()
    return {name: getattr(policy, name) for name in QUOTA_FIELDS}


@transaction.atomic
def create_team(name: str, **limits: int | Decimal | None) -> Team:
    """Without limits the team follows the platform default (no policy of its own). With
    any, it gets its own policy: the limits given (None: no limit), the rest copied from
    the default as it is now."""
    _check_limits(limits)
    name = name.strip()
    team = Team(name=name, slug=slugify(name))
    team.full_clean()
    team.save()
    if limits:
        policy = QuotaPolicy(team=team, **{**default_policy_values(), **limits})
        policy.full_clean()
        policy.save()
    logger.info("created team %s (id %s) with limits %s", team.name, team.pk, limits or "default")
    return team


def add_member(
    team: Team, user: AbstractBaseUser, role: str = Membership.Role.MEMBER
) -> Membership:
    membership, _ = Membership.objects.update_or_create(
        team=team, user=user, defaults={"role": role}
    )
    return membership


def remove_member(team: Team, user: AbstractBaseUser) -> None:
    """The user leaves the team: their open chat sockets are refused at the next message."""
    Membership.objects.filter(team=team, user_id=user.pk).delete()
    logger.info("removed user %s from team %s", user.pk, team.name)


@transaction.atomic
def issue_api_key(
    team: Team,
    name: str = "",
    expires_in_days: int | None = None,
    expires_at: datetime | None = None,
    scopes: tuple[str, ...] = DEFAULT_SCOPES,
    allowed_models: tuple[str, ...] = (),
    requests_per_minute: int | None = None,
    created_by: AbstractBaseUser | None = None,
    created_by_key: str = "",
) -> IssuedKey:
    if expires_in_days is not None and expires_in_days <= 0:
        raise ValidationError({"expires_in_days": "expires_in_days must be 1 or more."})
    if expires_in_days is not None:
        expires_at = timezone.now() + timedelta(days=expires_in_days)
    if requests_per_minute is not None and requests_per_minute < 0:
        raise ValidationError({"requests_per_minute": "requests_per_minute must be 0 or more."})
    valid_scopes = set(ApiKey.Scope.values)
    if not scopes or not set(scopes) <= valid_scopes:
        raise ValidationError({"scopes": f"Scopes must be a non-empty subset of {valid_scopes}."})
    check_live_keys(team)
    generated = new_key()
    key = ApiKey(
        team=team,
        lookup_id=generated.lookup_id,
        secret_hash=generated.secret_hash,
        name=name,
        scopes=sorted(set(scopes)),
        allowed_models=list(allowed_models),
        requests_per_minute=requests_per_minute,
        created_by=created_by,  # type: ignore[misc]
        created_by_key=created_by_key,
        expires_at=expires_at,
    )
    key.full_clean()
    key.save()
    # Replace a cached "missing" record in case this lookup id was probed before.
    key_records.publish(key.lookup_id, key_record_from_row(key))
    logger.info("issued API key %s for team %s", key.lookup_id, team.name)
    return IssuedKey(key=key, plaintext=generated.plaintext)


def check_live_keys(team: Team) -> None:
    """At most MAX_KEYS_PER_TEAM keys neither revoked nor expired: a leaked manage key must
    not mint keys without bound. Counted with the team row locked, so keys minted at the
    same moment cannot pass it together."""
    Team.objects.select_for_update().filter(pk=team.pk).first()
    live = ApiKey.objects.filter(team=team, revoked_at__isnull=True).exclude(
        expires_at__lte=timezone.now()
    )
    limit = settings.MAX_KEYS_PER_TEAM
    if live.count() >= limit:
        raise ValidationError(
            {"team": f"The team holds {limit} live keys, the most it may: revoke unused ones."}
        )


@transaction.atomic
def revoke_api_key(key: ApiKey) -> ApiKey:
    """Revoke; if Redis cannot be told, the database change rolls back and this raises."""
    key = ApiKey.objects.select_for_update().get(pk=key.pk)
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        logger.info("revoked API key %s of team %s", key.lookup_id, key.team_id)
    key_records.publish(key.lookup_id, key_record_from_row(key))
    return key


@transaction.atomic
def revoke_api_key_and_its_keys(key: ApiKey) -> list[ApiKey]:
    """Revoke `key` and every key minted with it through the management API, and theirs,
    within its team: what a leaked manage key made goes with it. The key first."""
    revoked = [revoke_api_key(key)]
    minters = [key.lookup_id]
    seen = {key.lookup_id}
    while minters:
        minted = ApiKey.objects.filter(team_id=key.team_id, created_by_key__in=minters)
        minters = []
        for child in minted.exclude(lookup_id__in=seen):
            seen.add(child.lookup_id)
            minters.append(child.lookup_id)
            revoked.append(revoke_api_key(child))
    return revoked


@transaction.atomic
def update_quota_policy(
    team: Team,
    max_tokens_policy: str | None = None,
    compress_prompts: bool | None = None,
    **changes: int | Decimal | None,
) -> QuotaPolicy:
    """Concurrent changes serialize on the row; the published record is the saved one. A
    team that followed the default gets its own policy: a copy of the default, changed.
    max_tokens_policy: refuse, clamp or trim (QuotaPolicy.LengthPolicy); compress_prompts:
    on or off (gateway/serving/compression.py); None leaves either as it is."""
    _check_limits(changes)
    QuotaPolicy.objects.get_or_create(team=team, defaults=default_policy_values())
    policy = QuotaPolicy.objects.select_for_update().get(team=team)
    said: dict[str, object] = dict(changes)
    for name, value in changes.items():
        setattr(policy, name, value)
    if max_tokens_policy is not None:
        policy.max_tokens_policy = max_tokens_policy
        said["max_tokens_policy"] = max_tokens_policy
    if compress_prompts is not None:
        policy.compress_prompts = compress_prompts
        said["compress_prompts"] = compress_prompts
    policy.full_clean()
    policy.save()
    team_limits.publish(str(team.pk), quota_limits_from_row(policy))
    logger.info("changed quota policy of team %s: %s", team.name, said)
    return policy


@transaction.atomic
def use_default_quota(team: Team) -> None:
    """The team drops its own policy and follows the platform default again."""
    QuotaPolicy.objects.filter(team=team).delete()
    team_limits.publish(str(team.pk), None)
    logger.info("team %s follows the default quota policy", team.name)


@transaction.atomic
def update_default_quota(**changes: int | Decimal | None) -> DefaultQuotaPolicy:
    """Change the platform default; every team without its own policy has the new limits
    in every process within AUTH_PROCESS_CACHE_TTL_S (one publish covers them all)."""
    _check_limits(changes)
    DefaultQuotaPolicy.load()
    policy = DefaultQuotaPolicy.objects.select_for_update().get(pk=DefaultQuotaPolicy.SINGLETON_ID)
    for name, value in changes.items():
        setattr(policy, name, value)
    policy.full_clean()
    policy.save()
    team_limits.publish(DEFAULT_LIMITS_ID, quota_limits_from_row(policy))
    logger.info("changed the default quota policy: %s", changes)
    return policy


def forget_deleted_key(key: ApiKey) -> None:
    """A deleted key (or a deleted team's keys) must stop authenticating everywhere."""
    key_records.publish(key.lookup_id, None)
    logger.info("deleted API key %s of team %s", key.lookup_id, key.team_id)
