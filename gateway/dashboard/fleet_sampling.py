"""Record the fleet once a minute: workers by state (the database) and their load (the
scraper's Redis snapshot). Nothing else keeps a history of how many workers ran, and GPU
cost is worker-hours times the deployment's hourly price."""

import json
import logging
from collections import defaultdict
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Count
from django.utils import timezone

from foundation.redis_clients import REDIS_FAILURES, sync_redis
from gateway.dashboard.models import FleetSample
from gateway.dashboard.rollup import floor_minute
from inference.models import ModelDeployment, Worker
from inference.snapshot import SNAPSHOT_KEY

logger = logging.getLogger(__name__)
STATES = [state.value for state in Worker.State]


def read_snapshot() -> list[dict[str, Any]]:
    """The scraper's view of every worker; empty (and logged) when Redis is unreachable."""
    try:
        raw = sync_redis().hgetall(SNAPSHOT_KEY)
    except (*REDIS_FAILURES, ImproperlyConfigured) as exc:
        logger.warning("fleet snapshot unreadable: %s", exc)
        return []
    return [json.loads(value) for value in raw.values()]


def _load_by_deployment(snapshot: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    load: dict[str, dict[str, float]] = defaultdict(
        lambda: {"running": 0.0, "waiting": 0.0, "kv": 0.0, "n": 0.0}
    )
    for worker in snapshot:
        entry = load[worker["deployment"]]
        entry["running"] += float(worker.get("running") or 0)
        entry["waiting"] += float(worker.get("waiting") or 0)
        entry["kv"] += float(worker.get("kv_usage") or 0)
        entry["n"] += 1
    return load


def record_fleet_sample(now: datetime | None = None) -> int:
    """Upsert this minute's sample of every deployment; returns how many were written."""
    bucket = floor_minute(now or timezone.now())
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    for row in Worker.objects.values("deployment_id", "state").annotate(n=Count("id")).order_by():
        counts[row["deployment_id"]][row["state"]] = row["n"]
    load = _load_by_deployment(read_snapshot())
    samples = []
    for deployment_id, name in ModelDeployment.objects.values_list("id", "name"):
        by_state, used = counts.get(deployment_id, {}), load.get(name)
        samples.append(
            FleetSample(
                bucket=bucket,
                deployment_id=deployment_id,
                **{state: by_state.get(state, 0) for state in STATES},
                running=used["running"] if used else 0.0,
                waiting=used["waiting"] if used else 0.0,
                kv_usage=used["kv"] / used["n"] if used and used["n"] else 0.0,
            )
        )
    FleetSample.objects.bulk_create(
        samples,
        update_conflicts=True,
        unique_fields=["bucket", "deployment"],
        update_fields=[*STATES, "running", "waiting", "kv_usage"],
    )
    return len(samples)
