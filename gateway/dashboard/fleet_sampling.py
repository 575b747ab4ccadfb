"""Record the fleet once a minute: workers by state (the database), their load (the
scraper's Redis snapshot), the requests waiting in the gateways' dispatch queues (published
in Redis: scaling/routing/queue_depth.py) and what the workers cost per hour at that
minute. Nothing else keeps a history of how many workers ran or how long the gateways'
queue was, and GPU cost is the sum of those minutes.

A worker's hourly cost is the GpuRate of its `gpu` label, the spot rate when it is
labelled `"spot": true`, else its deployment's gpu_cost_per_hour. It is recorded with the
sample, so a rate changed later prices the minutes after it, never the ones before."""

import json
import logging
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from foundation.redis_clients import REDIS_FAILURES, sync_redis
from gateway.dashboard.models import FleetSample
from gateway.dashboard.rollup import floor_minute
from inference.models import GpuRate, ModelDeployment, Worker
from inference.snapshot import SNAPSHOT_KEY
from inference.worker_labels import gpu_label, on_spot
from scaling.routing.queue_depth import read_depths

logger = logging.getLogger(__name__)
STATES = [state.value for state in Worker.State]
MICROS = 1_000_000


def read_snapshot() -> list[dict[str, Any]]:
    """The scraper's view of every worker; empty (and logged) when Redis is unreachable."""
    try:
        raw = sync_redis().hgetall(SNAPSHOT_KEY)
    except (*REDIS_FAILURES, ImproperlyConfigured) as exc:
        logger.warning("fleet snapshot unreadable: %s", exc)
        return []
    return [json.loads(value) for value in raw.values()]


def read_gateway_queues() -> dict[str, int]:
    """Requests waiting in the gateways' dispatch queues per deployment; empty (and logged)
    when Redis is unreachable: the minute records no queue rather than no sample."""
    try:
        return read_depths(sync_redis())
    except (*REDIS_FAILURES, ImproperlyConfigured) as exc:
        logger.warning("gateway queue depths unreadable: %s", exc)
        return {}


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


def worker_cost_per_hour(
    labels: Mapping[str, object], rates: Mapping[str, GpuRate], deployment_rate: Decimal
) -> Decimal:
    """USD per hour of one worker: its gpu label's rate (spot or on demand), else the
    deployment's gpu_cost_per_hour (a worker without a gpu label, or one nobody priced)."""
    gpu = gpu_label(labels)
    rate = rates.get(gpu) if gpu is not None else None
    return deployment_rate if rate is None else rate.per_hour(on_spot(labels))


def record_fleet_sample(now: datetime | None = None) -> int:
    """Upsert this minute's sample of every deployment; returns how many were written."""
    bucket = floor_minute(now or timezone.now())
    deployments = list(ModelDeployment.objects.values_list("id", "name", "gpu_cost_per_hour"))
    deployment_rate = {deployment_id: rate for deployment_id, _, rate in deployments}
    rates = {rate.gpu: rate for rate in GpuRate.objects.all()}
    counts: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    per_hour: dict[int, Decimal] = defaultdict(Decimal)
    workers = Worker.objects.filter(deployment_id__in=deployment_rate)
    for deployment_id, state, labels in workers.values_list("deployment_id", "state", "labels"):
        counts[deployment_id][state] += 1
        if state != Worker.State.DEAD:  # every other state holds a GPU
            rate = worker_cost_per_hour(labels or {}, rates, deployment_rate[deployment_id])
            per_hour[deployment_id] += rate
    load, queues = _load_by_deployment(read_snapshot()), read_gateway_queues()
    samples = []
    for deployment_id, name, _ in deployments:
        by_state, used = counts.get(deployment_id, {}), load.get(name)
        samples.append(
            FleetSample(
                bucket=bucket,
                deployment_id=deployment_id,
                **{state: by_state.get(state, 0) for state in STATES},
                running=used["running"] if used else 0.0,
                waiting=used["waiting"] if used else 0.0,
                gateway_queue=float(queues.get(name, 0)),
                kv_usage=used["kv"] / used["n"] if used and used["n"] else 0.0,
                gpu_cost_per_hour_micros=int(
                    (per_hour[deployment_id] * MICROS).to_integral_value()
                ),
            )
        )
    FleetSample.objects.bulk_create(
        samples,
        update_conflicts=True,
        unique_fields=["bucket", "deployment"],
        update_fields=[
            *STATES,
            *["running", "waiting", "gateway_queue", "kv_usage", "gpu_cost_per_hour_micros"],
        ],
    )
    return len(samples)
