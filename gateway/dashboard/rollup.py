"""Fill the rollup tables from the usage ledger, idempotently.

Every run recomputes whole buckets from their source and upserts them, so running it
twice, or concurrently, or after late ledger rows arrived, converges on the same numbers.
The periodic run (tasks.refresh_dashboard, every 30 s) recomputes the last
ROLLUP_LOOKBACK_MIN minutes of minute buckets from the ledger, then the hours they touch
from the minute buckets (never scanning an hour of ledger rows), and drops minute buckets
past their retention. A backfill (`manage.py rollup_usage --hours N`) builds hour buckets
straight from the ledger, so it never materialises a month of minute rows.
"""

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce, Trunc
from django.utils import timezone

from caching.outcome import Outcome
from gateway.dashboard import histogram
from gateway.dashboard.models import (
    FleetHour,
    FleetSample,
    HourRollup,
    KeyHourRollup,
    MinuteRollup,
)
from gateway.usage.models import UsageRecord

OUTCOMES = {
    Outcome.HIT_EXACT: "hits_exact",
    Outcome.HIT_SEMANTIC: "hits_semantic",
    Outcome.COALESCED: "coalesced",
    "miss": "misses",
    "bypass": "bypass",
}
METRICS = [
    "requests",
    "errors",
    "cancelled",
    "prompt_tokens",
    "completion_tokens",
    "cost_micros",
    *OUTCOMES.values(),
    "latency_ms_sum",
    "ttft_ms_sum",
    "ttft_count",
    *histogram.LATENCY_FIELDS,
    *histogram.TTFT_FIELDS,
]
KEY_METRICS = ["requests", "errors", "prompt_tokens", "completion_tokens", "cost_micros"]
FLEET_METRICS = [
    *["starting", "warm", "ready", "draining", "dead"],
    *["running", "waiting", "gateway_queue"],
]
GPU_COST = "gpu_cost_per_hour_micros"  # recorded per sample; null on older ones
# Each table: its grouping columns (as ORM values() names) and the metrics it keeps.
TABLES: dict[type[models.Model], tuple[list[str], list[str]]] = {
    MinuteRollup: (["team_id", "model", "api_key_id"], METRICS),
    HourRollup: (["team_id", "model"], METRICS),
    KeyHourRollup: (["team_id", "api_key_id"], KEY_METRICS),
}
UPSERT_BATCH = 2000


def floor_minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def _bucket_filter(field: str, lo: int, hi: int | None) -> Q:
    q = Q(**{f"{field}__gte": lo})
    return q if hi is None else q & Q(**{f"{field}__lt": hi})


def _ledger_aggregates() -> dict[str, Any]:
    """One GROUP BY computes every metric of a bucket (FILTER clauses on PostgreSQL)."""
    aggs: dict[str, Any] = {
        "requests": Count("id"),
        "errors": Count("id", filter=Q(status=UsageRecord.Status.FAILED)),
        "cancelled": Count("id", filter=Q(status=UsageRecord.Status.CANCELLED)),
        "prompt_tokens": Coalesce(Sum("prompt_tokens"), 0),
        "completion_tokens": Coalesce(Sum("completion_tokens"), 0),
        "cost_micros": Coalesce(Sum("cost_micros"), 0),
        "latency_ms_sum": Coalesce(Sum("latency_ms"), 0),
        "ttft_ms_sum": Coalesce(Sum("ttft_ms"), 0),
        "ttft_count": Count("ttft_ms"),
    }
    for outcome, field in OUTCOMES.items():
        aggs[field] = Count("id", filter=Q(cache_result=outcome))
    for i, (lo, hi) in enumerate(histogram.bounds()):
        aggs[histogram.LATENCY_FIELDS[i]] = Count("id", filter=_bucket_filter("latency_ms", lo, hi))
        aggs[histogram.TTFT_FIELDS[i]] = Count("id", filter=_bucket_filter("ttft_ms", lo, hi))
    return aggs


def _upsert(
    model: type[models.Model], rows: list[dict[str, Any]], keys: list[str], metrics: list[str]
) -> int:
    objects = [model(**row) for row in rows]
    unique = [
        "bucket",
        *({"team_id": "team", "deployment_id": "deployment"}.get(k, k) for k in keys),
    ]
    model._default_manager.bulk_create(
        objects,
        batch_size=UPSERT_BATCH,
        update_conflicts=True,
        unique_fields=unique,
        update_fields=metrics,
    )
    return len(objects)


def rollup_from_ledger(model: type[models.Model], start: datetime, end: datetime) -> int:
    """Recompute model's buckets in [start, end) from the ledger; returns rows written."""
    keys, metrics = TABLES[model]
    kind = "minute" if model is MinuteRollup else "hour"
    aggregates = {name: agg for name, agg in _ledger_aggregates().items() if name in metrics}
    rows = (
        UsageRecord.objects.filter(created_at__gte=start, created_at__lt=end)
        .annotate(bucket=Trunc("created_at", kind))
        .values("bucket", *keys)
        .annotate(**aggregates)
        .order_by()
    )
    return _upsert(model, list(rows), keys, metrics)


def hours_from_minutes(start: datetime, end: datetime) -> int:
    """Recompute the hour buckets in [start, end) (whole hours) of both hour tables from
    the minute buckets, and the fleet's hours from its minute samples."""
    written = 0
    minutes = MinuteRollup.objects.filter(bucket__gte=start, bucket__lt=end)
    for model in (HourRollup, KeyHourRollup):
        keys, metrics = TABLES[model]
        rows = (
            minutes.annotate(hour=Trunc("bucket", "hour"))
            .values("hour", *keys)
            .annotate(**{m: Sum(m) for m in metrics})
            .order_by()
        )
        written += _upsert(model, [_as_bucket(row) for row in rows], keys, metrics)
    return written


def fleet_hours(start: datetime, end: datetime) -> int:
    """Sum each deployment's fleet samples per hour. The hour's recorded GPU cost is kept
    only when every sample of it has one: an hour that began before samples recorded it is
    costed whole at the deployment's price (costs.deployment_costs), never half of it."""
    rows = (
        FleetSample.objects.filter(bucket__gte=start, bucket__lt=end)
        .annotate(hour=Trunc("bucket", "hour"))
        .values("hour", "deployment_id")
        .annotate(
            minutes=Count("id"),
            costed=Count(GPU_COST),
            **{m: Sum(m) for m in [*FLEET_METRICS, GPU_COST]},
        )
        .order_by()
    )
    hours = []
    for row in rows:
        costed = row.pop("costed")
        if costed < row["minutes"]:
            row[GPU_COST] = None
        hours.append(_as_bucket(row))
    return _upsert(FleetHour, hours, ["deployment_id"], ["minutes", *FLEET_METRICS, GPU_COST])


def _as_bucket(row: dict[str, Any]) -> dict[str, Any]:
    return {**{k: v for k, v in row.items() if k != "hour"}, "bucket": row["hour"]}


def refresh(now: datetime | None = None) -> dict[str, int]:
    """The periodic run: recent minutes from the ledger, their hours from the minutes."""
    now = now or timezone.now()
    end = floor_minute(now) + timedelta(minutes=1)  # the current minute too, recomputed later
    start = end - timedelta(minutes=settings.ROLLUP_LOOKBACK_MIN + 1)
    hour = floor_hour(start)
    if not MinuteRollup.objects.filter(bucket__gte=hour, bucket__lt=start).exists():
        # First run this hour (fresh start, or the task was down): minutes of this hour
        # before the look-back may be missing, and the hour is summed from minutes.
        start = hour
    minutes = rollup_from_ledger(MinuteRollup, start, end)
    hours = hours_from_minutes(hour, end) + fleet_hours(hour, end)
    retention = floor_hour(now) - timedelta(hours=settings.ROLLUP_MINUTE_RETENTION_H)
    purged, _ = MinuteRollup.objects.filter(bucket__lt=retention).delete()
    return {"minute_rows": minutes, "hour_rows": hours, "purged": purged}


def backfill(hours: int, now: datetime | None = None) -> dict[str, int]:
    """Rebuild the last `hours` hours: hour buckets from the ledger, and minute buckets for
    as much of that range as minute retention keeps."""
    now = now or timezone.now()
    end = floor_minute(now) + timedelta(minutes=1)
    start = floor_hour(now) - timedelta(hours=hours)
    minute_start = max(start, floor_hour(now) - timedelta(hours=settings.ROLLUP_MINUTE_RETENTION_H))
    return {
        "hour_rows": rollup_from_ledger(HourRollup, start, end)
        + rollup_from_ledger(KeyHourRollup, start, end)
        + fleet_hours(start, end),
        "minute_rows": rollup_from_ledger(MinuteRollup, minute_start, end),
    }
