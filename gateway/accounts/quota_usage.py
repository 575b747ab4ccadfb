"""Read a team's current usage against each limit, for the management API and dashboards."""

from dataclasses import dataclass

from foundation.redis_clients import REDIS_FAILURES, sync_redis
from gateway.accounts.quotas import AdmissionUnavailable, month_of, team_counter_keys
from gateway.accounts.records import QuotaLimits

WINDOW_S = 60


@dataclass(frozen=True)
class LimitUsage:
    limit: str
    used: int
    limit_value: int | None

    @property
    def remaining(self) -> int | None:
        return None if self.limit_value is None else max(self.limit_value - self.used, 0)

    def as_dict(self) -> dict[str, str | int | None]:
        return {
            "limit": self.limit,
            "used": self.used,
            "limit_value": self.limit_value,
            "remaining": self.remaining,
        }


def _window_sum(fields: dict[str, str], now_s: int) -> int:
    """Sum the per-second buckets still in the window (bookkeeping fields are not digits)."""
    return sum(
        int(amount)
        for second, amount in fields.items()
        if second.isdigit() and int(second) > now_s - WINDOW_S
    )


def read_team_usage(team_id: int, limits: QuotaLimits) -> list[LimitUsage]:
    client = sync_redis()
    try:
        now_s = int(client.time()[0])
        month, _ = month_of(now_s)
        keys = team_counter_keys(team_id, month)
        pipe = client.pipeline(transaction=False)
        pipe.hgetall(keys["requests_per_minute"])
        pipe.hgetall(keys["tokens_per_minute"])
        pipe.get(keys["tokens_per_month"])
        pipe.get(keys["budget_per_month"])
        rpm, tpm, month_tokens, month_cost = pipe.execute()
    except REDIS_FAILURES as exc:
        raise AdmissionUnavailable("Redis is unreachable; usage cannot be read.") from exc
    return [
        LimitUsage("requests_per_minute", _window_sum(rpm, now_s), limits.requests_per_minute),
        LimitUsage("tokens_per_minute", _window_sum(tpm, now_s), limits.tokens_per_minute),
        LimitUsage("tokens_per_month", int(month_tokens or 0), limits.tokens_per_month),
        LimitUsage("budget_per_month_micros", int(month_cost or 0), limits.budget_per_month_micros),
    ]
