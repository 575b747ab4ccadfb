"""Key and quota records as authentication and admission read them, through the
cross-process record cache (foundation/record_cache.py).

A team's limits are its own QuotaPolicy or, for a team without one, the platform default
(DefaultQuotaPolicy). Both live in one record cache: the team's id holds its own limits or
"missing", and DEFAULT_LIMITS_ID holds the default, so an edit of the default is one publish
that every team following it sees, and clearing the cache clears both.
"""

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from foundation.record_cache import RecordCache
from gateway.accounts.models import (
    ApiKey,
    DefaultQuotaPolicy,
    QuotaFields,
    QuotaPolicy,
    default_limits_from_settings,
)

DEFAULT_LIMITS_ID = "default"


@dataclass(frozen=True)
class KeyRecord:
    lookup_id: str
    team_id: int
    secret_hash: str
    scopes: tuple[str, ...]
    allowed_models: tuple[str, ...]
    requests_per_minute: int | None
    expires_at: float | None
    revoked: bool


@dataclass(frozen=True)
class QuotaLimits:
    """A team's limits as admission sees them; None means unlimited."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    tokens_per_month: int | None = None
    budget_per_month_micros: int | None = None
    max_tokens_cap: int | None = None
    queue_weight: int = 1
    max_concurrent_requests: int | None = None
    # max_tokens over the context window or max_tokens_cap: lowered to fit, not refused
    # (a team's own policy only: the platform default refuses).
    clamp_max_tokens: bool = False
    # Over the context window: the oldest turns left out to fit (gateway/serving/
    # context_trim.py); over max_tokens_cap it refuses. A team's own policy only, too.
    trim_context: bool = False
    # Prompts compressed before they are counted and sent (gateway/serving/compression.py);
    # a team's own policy only.
    compress_prompts: bool = False
    # Tokens a team's unfinished batches may hold (gateway/batches); None: no limit.
    batch_queue_tokens: int | None = None


def key_record_from_row(key: ApiKey) -> KeyRecord:
    return KeyRecord(
        lookup_id=key.lookup_id,
        team_id=key.team_id,
        secret_hash=key.secret_hash,
        scopes=tuple(key.scopes),
        allowed_models=tuple(key.allowed_models),
        requests_per_minute=key.requests_per_minute,
        expires_at=key.expires_at.timestamp() if key.expires_at else None,
        revoked=key.revoked_at is not None,
    )


def quota_limits_from_row(policy: QuotaFields | None) -> QuotaLimits:
    """A policy row's limits; None (no row) is unlimited: callers that mean "this team's
    limits" use effective_limits, which falls back to the default."""
    if policy is None:
        return QuotaLimits()
    budget = policy.budget_per_month_usd
    return QuotaLimits(
        requests_per_minute=policy.requests_per_minute,
        tokens_per_minute=policy.tokens_per_minute,
        tokens_per_month=policy.tokens_per_month,
        budget_per_month_micros=None if budget is None else int(budget * Decimal(1_000_000)),
        max_tokens_cap=policy.max_tokens_cap,
        queue_weight=policy.queue_weight,
        max_concurrent_requests=policy.max_concurrent_requests,
        batch_queue_tokens=policy.max_batch_queue_tokens,
        clamp_max_tokens=isinstance(policy, QuotaPolicy)
        and policy.max_tokens_policy == QuotaPolicy.LengthPolicy.CLAMP,
        trim_context=isinstance(policy, QuotaPolicy)
        and policy.max_tokens_policy == QuotaPolicy.LengthPolicy.TRIM,
        compress_prompts=isinstance(policy, QuotaPolicy) and policy.compress_prompts,
    )


def _load_key(lookup_id: str) -> KeyRecord | None:
    key = ApiKey.objects.filter(lookup_id=lookup_id).first()
    return None if key is None else key_record_from_row(key)


def policy_for_team(team_id: int) -> QuotaFields:
    """The policy that governs the team: its own, or the platform default."""
    own = QuotaPolicy.objects.filter(team_id=team_id).first()
    return own if own is not None else DefaultQuotaPolicy.load()


def effective_limits(team_id: int) -> QuotaLimits:
    """The team's limits read from the database (management API, dashboards); the request
    path uses limits_for_team."""
    return quota_limits_from_row(policy_for_team(team_id))


def _load_limits(ident: str) -> QuotaLimits | None:
    """The default's limits, or a team's own (None: the team follows the default)."""
    if ident == DEFAULT_LIMITS_ID:
        return quota_limits_from_row(DefaultQuotaPolicy.load())
    policy = QuotaPolicy.objects.filter(team_id=int(ident)).first()
    return None if policy is None else quota_limits_from_row(policy)


def _decode_key(data: dict[str, Any]) -> KeyRecord:
    data["scopes"] = tuple(data["scopes"])
    data["allowed_models"] = tuple(data["allowed_models"])
    return KeyRecord(**data)


key_records: RecordCache[KeyRecord] = RecordCache("apikey", _load_key, _decode_key)
team_limits: RecordCache[QuotaLimits] = RecordCache(
    "quota", _load_limits, lambda data: QuotaLimits(**data)
)


async def limits_for_team(team_id: int) -> QuotaLimits:
    """The team's current limits: its own policy, or the platform default if it has none."""
    own = await team_limits.get(str(team_id))
    if own is not None:
        return own
    default = await team_limits.get(DEFAULT_LIMITS_ID)
    # The loader always finds the default; "missing" could only be a hand-written Redis
    # record, and then the settings' limits apply rather than none.
    if default is not None:
        return default
    fallback = default_limits_from_settings()
    return QuotaLimits(
        requests_per_minute=fallback["requests_per_minute"],
        tokens_per_minute=fallback["tokens_per_minute"],
        tokens_per_month=fallback["tokens_per_month"],
        max_tokens_cap=fallback["max_tokens_cap"],
    )
