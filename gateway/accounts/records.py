"""Key and quota records as authentication and admission read them, through the
cross-process record cache (foundation/record_cache.py)."""

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from foundation.record_cache import RecordCache
from gateway.accounts.models import ApiKey, QuotaPolicy


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


def quota_limits_from_row(policy: QuotaPolicy | None) -> QuotaLimits:
    if policy is None:
        return QuotaLimits()
    budget = policy.budget_per_month_usd
    return QuotaLimits(
        requests_per_minute=policy.requests_per_minute,
        tokens_per_minute=policy.tokens_per_minute,
        tokens_per_month=policy.tokens_per_month,
        budget_per_month_micros=None if budget is None else int(budget * Decimal(1_000_000)),
        max_tokens_cap=policy.max_tokens_cap,
    )


def _load_key(lookup_id: str) -> KeyRecord | None:
    key = ApiKey.objects.filter(lookup_id=lookup_id).first()
    return None if key is None else key_record_from_row(key)


def _load_limits(team_id: str) -> QuotaLimits | None:
    policy = QuotaPolicy.objects.filter(team_id=int(team_id)).first()
    return quota_limits_from_row(policy)


def _decode_key(data: dict[str, Any]) -> KeyRecord:
    data["scopes"] = tuple(data["scopes"])
    data["allowed_models"] = tuple(data["allowed_models"])
    return KeyRecord(**data)


key_records: RecordCache[KeyRecord] = RecordCache("apikey", _load_key, _decode_key)
team_limits: RecordCache[QuotaLimits] = RecordCache(
    "quota", _load_limits, lambda data: QuotaLimits(**data)
)


async def limits_for_team(team_id: int) -> QuotaLimits:
    """The team's current limits; a team without a policy is unlimited."""
    return await team_limits.get(str(team_id)) or QuotaLimits()
