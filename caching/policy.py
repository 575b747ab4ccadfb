"""The cache policy each request runs under, shared across processes within 2 seconds.

A team's own CachePolicy row wins; otherwise the global row (no team); otherwise the
defaults from settings. Records travel the same way as quota records (RecordCache: a
process copy for AUTH_PROCESS_CACHE_TTL_S, then Redis, then the database), so an admin's
change reaches every gateway process within that bound plus one Redis round trip.
"""

from dataclasses import dataclass, fields, replace
from typing import Any

from django.conf import settings

from caching.models import SAMPLED_TTL_S, CachePolicy
from foundation.record_cache import RecordCache

GLOBAL = "global"
POLICY_FIELDS = [
    "exact_enabled",
    "semantic_enabled",
    "cache_sampled",
    "exact_ttl_s",
    "semantic_ttl_s",
    "sampled_ttl_s",
    "max_age_s",
    "similarity_threshold",
    "max_false_hit_rate",
    "audit_rate",
    "verify_enabled",
    "max_entry_bytes",
    "memory_budget_bytes",
]


@dataclass(frozen=True)
class CacheSettings:
    exact_enabled: bool
    semantic_enabled: bool
    cache_sampled: bool
    exact_ttl_s: int
    semantic_ttl_s: int
    max_age_s: int
    similarity_threshold: float
    verify_enabled: bool
    max_entry_bytes: int
    memory_budget_bytes: int
    # Last, with a default: a record published before the field existed still decodes.
    sampled_ttl_s: int = SAMPLED_TTL_S
    max_false_hit_rate: float | None = None  # None: the similarity threshold decides
    audit_rate: float = 0.0  # share of semantic hits regenerated and compared

    def for_request(self, deterministic: bool) -> "CacheSettings":
        """The policy a request's reply is kept under. A sampled reply (cached at all only
        with cache_sampled) lives sampled_ttl_s in both caches; a deterministic one the
        caches' own TTLs. A TTL the request asks for still wins (ttl_for)."""
        if deterministic:
            return self
        return replace(self, exact_ttl_s=self.sampled_ttl_s, semantic_ttl_s=self.sampled_ttl_s)

    def ttl_for(self, kind_ttl_s: int, requested_ttl_s: int | None) -> int:
        """A request may ask for its own TTL; the hard maximum age always wins."""
        return min(requested_ttl_s or kind_ttl_s, self.max_age_s)


def default_settings() -> CacheSettings:
    return CacheSettings(
        exact_enabled=settings.CACHE_EXACT_ENABLED,
        semantic_enabled=settings.CACHE_SEMANTIC_ENABLED,
        cache_sampled=False,
        exact_ttl_s=settings.CACHE_EXACT_TTL_S,
        semantic_ttl_s=settings.CACHE_SEMANTIC_TTL_S,
        sampled_ttl_s=SAMPLED_TTL_S,
        max_age_s=settings.CACHE_EXACT_MAX_TTL_S,
        similarity_threshold=settings.CACHE_SEMANTIC_THRESHOLD,
        max_false_hit_rate=None,
        audit_rate=0.0,
        verify_enabled=True,
        max_entry_bytes=settings.CACHE_EXACT_MAX_ENTRY_BYTES,
        memory_budget_bytes=settings.CACHE_MEMORY_BUDGET_BYTES,
    )


def settings_from_row(row: CachePolicy) -> CacheSettings:
    return CacheSettings(**{name: getattr(row, name) for name in POLICY_FIELDS})


def effective_policy(team_id: int | None) -> CacheSettings:
    """What is in force for a team (None: for teams without a row), read from the database:
    the team's own row, else the global row, else the settings' defaults. The hot path
    resolves the same way through the record cache (policy_for_team)."""
    rows = CachePolicy.objects.all()
    row = rows.filter(team_id=team_id).first() if team_id is not None else None
    row = row or rows.filter(team__isnull=True).first()
    return settings_from_row(row) if row is not None else default_settings()


def _load(ident: str) -> CacheSettings | None:
    rows = CachePolicy.objects.all()
    row = (
        rows.filter(team__isnull=True) if ident == GLOBAL else rows.filter(team_id=int(ident))
    ).first()
    return None if row is None else settings_from_row(row)


def _decode(data: dict[str, Any]) -> CacheSettings:
    known = {f.name for f in fields(CacheSettings)}
    return CacheSettings(**{k: v for k, v in data.items() if k in known})


cache_policies: RecordCache[CacheSettings] = RecordCache("cachepolicy", _load, _decode)


async def policy_for_team(team_id: int) -> CacheSettings:
    """Two process-local lookups on the hot path; Redis only when they have aged out."""
    return (
        await cache_policies.get(str(team_id))
        or await cache_policies.get(GLOBAL)
        or default_settings()
    )


def publish(row: CachePolicy | None, team_id: int | None) -> None:
    """After a write or delete: share the new record (None: fall back to the default)."""
    ident = GLOBAL if team_id is None else str(team_id)
    cache_policies.publish(ident, None if row is None else settings_from_row(row))
