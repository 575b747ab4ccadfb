"""`manage.py bench_dashboard`: synthetic usage at scale, then how long each page takes.

It writes into the configured database under its own names (teams bench-team-N,
deployments bench-model-N, request ids bench-...) and removes them afterwards unless
--keep. Usage rows go in with COPY on PostgreSQL (about 1M rows in tens of seconds), with
big bulk_create batches elsewhere.
"""

import random
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import Client

from caching.outcome import Outcome
from gateway.accounts.models import ApiKey, QuotaPolicy, Team
from gateway.dashboard.models import (
    FleetHour,
    FleetSample,
    HourRollup,
    KeyHourRollup,
    MinuteRollup,
    TuningChange,
)
from gateway.dashboard.rollup import floor_minute
from gateway.usage.models import UsageRecord
from inference.models import ModelDeployment
from scaling.models import ScalingDecision

PREFIX = "bench-"
COLUMNS = [
    "request_id",
    "team_id",
    "api_key_id",
    "model",
    "prompt_tokens",
    "completion_tokens",
    "cache_result",
    "ttft_ms",
    "latency_ms",
    "worker",
    "status",
    "cost_micros",
    "created_at",
]
PAGES = ["", "costs/", "teams/", "fleet/", "tuning/"]
OUTCOMES = [Outcome.MISS] * 6 + [Outcome.HIT_EXACT] * 2 + [Outcome.HIT_SEMANTIC, Outcome.COALESCED]


def make_world(teams: int, models: int) -> tuple[list[int], list[str]]:
    team_ids = []
    for n in range(teams):
        team = Team.objects.create(name=f"{PREFIX}team-{n}", slug=f"{PREFIX}team-{n}")
        QuotaPolicy.objects.create(team=team, budget_per_month_usd=Decimal(500 + 100 * n))
        team_ids.append(team.pk)
    names = [f"{PREFIX}model-{n}" for n in range(models)]
    for n, name in enumerate(names):
        ModelDeployment.objects.create(name=name, gpu_cost_per_hour=Decimal("2.5") * (n + 1))
    return team_ids, names


def usage_rows(
    count: int, team_ids: list[int], models: list[str], keys: int, days: int, now: datetime
) -> Iterator[tuple[Any, ...]]:
    """Keys belong to teams (keys // teams each), as real keys do."""
    rng = random.Random(7)
    span = days * 86400
    per_team = max(1, keys // len(team_ids))
    for n in range(count):
        outcome = rng.choice(OUTCOMES)
        generated = outcome == "miss"
        prompt, completion = (rng.randint(20, 800), rng.randint(5, 400)) if generated else (0, 0)
        latency = int(rng.lognormvariate(6.5, 0.7)) if generated else rng.randint(2, 30)
        team = rng.randrange(len(team_ids))
        yield (
            f"{PREFIX}{n}",
            team_ids[team],
            f"b{team:03d}{rng.randrange(per_team):04d}",
            rng.choice(models),
            prompt,
            completion,
            outcome,
            min(latency, rng.randint(20, 900)),
            latency,
            "http://bench-worker",
            "failed" if rng.random() < 0.01 else "ok",
            (prompt + 2 * completion) * 2,
            now - timedelta(seconds=rng.random() * span),
        )


def insert_usage(rows: Iterator[tuple[Any, ...]]) -> None:
    if connection.vendor == "postgresql":
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy(f"COPY usage_usagerecord ({', '.join(COLUMNS)}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
        return
    batch: list[UsageRecord] = []
    for row in rows:
        batch.append(UsageRecord(**dict(zip(COLUMNS, row, strict=True))))
        if len(batch) == 20_000:
            UsageRecord.objects.bulk_create(batch)
            batch = []
    UsageRecord.objects.bulk_create(batch)


def insert_fleet(models: list[str], days: int, now: datetime) -> int:
    """One sample per deployment per minute over the whole range, and an autoscaler
    decision every ten minutes, as a running platform would have recorded."""
    deployments = list(ModelDeployment.objects.filter(name__in=models))
    start = floor_minute(now) - timedelta(days=days)
    samples, decisions = [], []
    for minute in range(days * 1440 + 1):
        at = start + timedelta(minutes=minute)
        ready = 2 + (minute // 60) % 5
        for d in deployments:
            samples.append(
                FleetSample(
                    bucket=at,
                    deployment=d,
                    ready=ready,
                    warm=1,
                    draining=minute % 3 == 0,
                    running=ready * 20.0,
                    waiting=float(minute % 17),
                    kv_usage=0.4,
                )
            )
            if minute % 10 == 0:
                decisions.append(
                    ScalingDecision(
                        deployment=d,
                        at=at,
                        action="hold",
                        rule="in-band",
                        from_replicas=ready,
                        to_replicas=ready,
                        reason="utilisation 0.55 inside the band",
                    )
                )
    FleetSample.objects.bulk_create(samples, batch_size=10_000)
    ScalingDecision.objects.bulk_create(decisions, batch_size=10_000)
    return len(samples)


def time_pages(repeat: int) -> list[tuple[str, str, float, float]]:
    client = Client()
    user, _ = get_user_model().objects.get_or_create(username=f"{PREFIX}staff", is_staff=True)
    client.force_login(user)
    results = []
    for page in PAGES:
        for period in ("hour", "day", "month"):
            url = f"/dashboard/{page}?period={period}"
            timings = []
            for _ in range(repeat + 1):  # the first request warms caches and is not counted
                started = time.perf_counter()
                response = client.get(url)
                timings.append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    raise RuntimeError(f"{url} answered {response.status_code}")
            results.append(
                (f"/dashboard/{page}", period, statistics.median(timings[1:]), max(timings[1:]))
            )
    return results


def clean_up() -> None:
    """Raw deletes: the ORM's cascade would load every usage row first."""
    teams = Team.objects.filter(name__startswith=PREFIX)
    deployments = ModelDeployment.objects.filter(name__startswith=PREFIX)
    with transaction.atomic():
        for model in (UsageRecord, MinuteRollup, HourRollup, KeyHourRollup):
            model._default_manager.filter(team__in=teams)._raw_delete(connection.alias)
        for model2 in (FleetSample, FleetHour, ScalingDecision, TuningChange):
            model2._default_manager.filter(deployment__in=deployments)._raw_delete(connection.alias)
        ApiKey.objects.filter(team__in=teams).delete()
        QuotaPolicy.objects.filter(team__in=teams).delete()
        teams.delete()
        deployments.delete()
        get_user_model().objects.filter(username=f"{PREFIX}staff").delete()


def now_utc() -> datetime:
    return datetime.now(UTC)
