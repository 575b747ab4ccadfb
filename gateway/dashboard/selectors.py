"""Reads for the dashboard pages: every figure comes from the rollup tables or the fleet
samples (a bounded number of rows per page, whatever the size of the ledger), never from
a scan of the usage ledger."""

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.models import F, Max, QuerySet, Sum

from foundation.redis_clients import REDIS_FAILURES, sync_redis
from gateway.accounts.models import ApiKey, DefaultQuotaPolicy, QuotaFields, QuotaPolicy, Team
from gateway.accounts.quota_usage import LimitUsage, read_team_usage
from gateway.accounts.quotas import AdmissionUnavailable
from gateway.accounts.records import quota_limits_from_row
from gateway.accounts.rejections import rejected_between
from gateway.dashboard import histogram
from gateway.dashboard.models import FleetHour, FleetSample, KeyHourRollup, Rollup
from gateway.dashboard.periods import Period
from gateway.dashboard.rollup import METRICS
from scaling.routing.queue_depth import read_depths

STATES = ["starting", "warm", "ready", "draining", "dead"]
HIT_KINDS = {"exact": "hits_exact", "semantic": "hits_semantic", "coalesced": "coalesced"}


def rollups(p: Period) -> "QuerySet[Rollup]":
    return p.table._default_manager.filter(bucket__gte=p.start, bucket__lt=p.end)


def usage_series(p: Period) -> list[dict[str, Any]]:
    """One row per bucket with every metric summed over teams, models and keys, plus the
    derived rates and percentile estimates the Overview charts plot."""
    rows = rollups(p).values("bucket").annotate(**{m: Sum(m) for m in METRICS}).order_by("bucket")
    series = []
    for row in rows:
        requests = row["requests"] or 0
        answered = requests - row["bypass"]
        series.append(
            {
                "bucket": row["bucket"],
                "requests": requests,
                "rps": requests / p.bucket_s,
                "error_rate": row["errors"] / requests if requests else 0.0,
                "latency_p50": histogram.percentile(
                    [row[f] for f in histogram.LATENCY_FIELDS], 0.5
                ),
                "latency_p99": histogram.percentile(
                    [row[f] for f in histogram.LATENCY_FIELDS], 0.99
                ),
                "ttft_p50": histogram.percentile([row[f] for f in histogram.TTFT_FIELDS], 0.5),
                "ttft_p99": histogram.percentile([row[f] for f in histogram.TTFT_FIELDS], 0.99),
                **{
                    f"hit_rate_{kind}": row[field] / answered if answered else 0.0
                    for kind, field in HIT_KINDS.items()
                },
            }
        )
    return series


def fleet_series(p: Period) -> list[dict[str, Any]]:
    """Workers by state and queue lengths (on the workers, and in the gateways' dispatch
    queues) per bucket, summed over deployments (for hour buckets: the mean over the hour's
    samples)."""
    names = [*STATES, "waiting", "gateway_queue", "running"]
    table: Any = FleetSample if p.by_minute else FleetHour
    per = {} if p.by_minute else {"minutes": Max("minutes")}
    rows = (
        table.objects.filter(bucket__gte=p.start, bucket__lt=p.end)
        .values("bucket")
        .annotate(**per, **{s: Sum(s) for s in names})
        .order_by("bucket")
    )
    return [
        {"bucket": row["bucket"], **{k: (row[k] or 0) / (row.get("minutes") or 1) for k in names}}
        for row in rows
    ]


def gateway_queue_now() -> dict[str, int] | None:
    """Requests waiting in the gateways' dispatch queues now, per deployment (every gateway
    process publishes its own; scaling/routing/queue_depth.py). None: Redis did not answer."""
    try:
        return read_depths(sync_redis())
    except (*REDIS_FAILURES, ImproperlyConfigured):
        return None


def totals(p: Period) -> dict[str, Any]:
    row = rollups(p).aggregate(**{m: Sum(m) for m in METRICS})
    row = {k: v or 0 for k, v in row.items()}
    requests = row["requests"]
    return {
        **row,
        "tokens": row["prompt_tokens"] + row["completion_tokens"],
        "error_rate": row["errors"] / requests if requests else 0.0,
        "latency_p50": histogram.percentile([row[f] for f in histogram.LATENCY_FIELDS], 0.5),
        "latency_p99": histogram.percentile([row[f] for f in histogram.LATENCY_FIELDS], 0.99),
        "rps": requests / (p.hours * 3600),
    }


@dataclass(frozen=True)
class TeamUsage:
    team: Team
    requests: int
    errors: int
    tokens: int
    cost_micros: int
    limits: list[LimitUsage] | None  # None: Redis (where live quota counters live) is down
    top_keys: list[dict[str, Any]]
    rejected: dict[str, int] | None = None  # 429s by limit in the period; None: Redis down


def team_usage(p: Period, top: int = 5) -> list[TeamUsage]:
    per_team = {
        row["team_id"]: row
        for row in rollups(p)
        .values("team_id")
        .annotate(
            requests=Sum("requests"),
            errors=Sum("errors"),
            tokens=Sum(F("prompt_tokens") + F("completion_tokens")),
            cost_micros=Sum("cost_micros"),
        )
        .order_by()
    }
    keys: dict[int, list[dict[str, Any]]] = {}
    by_key: Any = (
        rollups(p)
        if p.by_minute
        else KeyHourRollup.objects.filter(bucket__gte=p.start, bucket__lt=p.end)
    )
    key_rows = (
        by_key.values("team_id", "api_key_id")
        .annotate(requests=Sum("requests"), tokens=Sum(F("prompt_tokens") + F("completion_tokens")))
        .order_by("team_id", "-requests")
    )
    for row in key_rows:
        keys.setdefault(row["team_id"], []).append(row)
    # Only the names shown: every key ever issued (revoked ones are kept) grew this read.
    shown = {k["api_key_id"] for rows in keys.values() for k in rows[:top]}
    names = dict(ApiKey.objects.filter(lookup_id__in=shown).values_list("lookup_id", "name"))
    policies: dict[int, QuotaFields] = {q.team_id: q for q in QuotaPolicy.objects.all()}
    default = DefaultQuotaPolicy.load()  # for every team without its own policy
    result = []
    for team in Team.objects.all():
        row = per_team.get(team.pk, {})
        top_keys = [
            {**k, "name": names.get(k["api_key_id"], "")} for k in keys.get(team.pk, [])[:top]
        ]
        result.append(
            TeamUsage(
                team,
                row.get("requests") or 0,
                row.get("errors") or 0,
                row.get("tokens") or 0,
                row.get("cost_micros") or 0,
                _limits(team.pk, policies.get(team.pk, default)),
                top_keys,
                _rejected(team.pk, p),
            )
        )
    return result


def _rejected(team_id: int, p: Period) -> dict[str, int] | None:
    try:
        return rejected_between(team_id, p.start, p.end)
    except (*REDIS_FAILURES, ImproperlyConfigured):
        return None


def _limits(team_id: int, policy: QuotaFields) -> list[LimitUsage] | None:
    try:
        return read_team_usage(team_id, quota_limits_from_row(policy))
    except (AdmissionUnavailable, ImproperlyConfigured):  # Redis down, or not configured
        return None
