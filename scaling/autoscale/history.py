"""What the loop measured, kept in Redis so any leader (after a failover) sees the history.

- samples: the last RAW_KEEP_S of per-tick Samples (JSON list), for sustained windows and
  the forecast's level and trend;
- buckets: mean demand per 5-minute bucket for RETAIN_S (8 days), for daily and weekly
  seasonality. Each bucket is two hash fields (`<start>:s` sum, `<start>:n` count) so a
  tick adds to it with HINCRBYFLOAT and no read-modify-write race.
"""

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict

import redis

from inference.snapshot import WorkerView
from scaling.autoscale.forecast import WEEK, Forecaster, bucket_start
from scaling.autoscale.types import Sample

RAW_KEEP_S = 3600.0
RETAIN_S = WEEK + 86_400.0


def samples_key(deployment: str) -> str:
    return f"sluice:autoscale:{deployment}:samples"


def buckets_key(deployment: str) -> str:
    return f"sluice:autoscale:{deployment}:buckets"


def sample_from_views(
    views: Iterable[WorkerView], now: float, gateway_queue: float = 0.0
) -> Sample:
    """One deployment's workers, and what waits for them in the gateways -> a Sample.

    Utilisation is the mean over ready workers of batch occupancy (running over the
    deployment's max_in_flight_per_worker) or KV-cache usage, whichever is higher: vLLM's
    /metrics has no GPU busy figure, and these two are what saturates first. The queue is
    what waits on the workers (vLLM's waiting count) plus gateway_queue, the requests held
    in the gateways' dispatch queues (published in Redis, scaling/routing/queue_depth.py):
    the dispatcher holds each worker at its batch target, so behind a gateway the excess
    waits there, not on the worker. Demand counts every request a ready or draining worker
    holds (running + waiting) plus gateway_queue. A worker in sleep mode serves nothing and
    counts nowhere."""
    live = [v for v in views if v.state in ("ready", "draining") and v.healthy and not v.sleeping]
    ready = [v for v in live if v.state == "ready"]
    shares = [max(v.running / max(v.max_in_flight, 1), v.kv_usage) for v in ready]
    slow = [v.ttft_p99_s for v in ready if v.ttft_p99_s is not None]
    starting = sum(1 for v in views if v.state == "starting")
    return Sample(
        at=now,
        utilisation=min(sum(shares) / len(shares), 1.0) if shares else 0.0,
        queue=sum(v.waiting for v in live) + gateway_queue,
        demand=sum(v.running + v.waiting for v in live) + gateway_queue,
        ttft_p99_s=max(slow) if slow else None,
        serving=len(ready) + starting,
        gateway_queue=gateway_queue,
    )


class History:
    """Per-deployment samples and seasonal buckets in Redis."""

    def __init__(self, client: redis.Redis, forecaster: Forecaster) -> None:
        self.client, self.forecaster = client, forecaster

    def record(self, deployment: str, sample: Sample) -> None:
        bucket = bucket_start(sample.at, self.forecaster.bucket_s)
        expired = [
            bucket_start(
                sample.at - RETAIN_S - k * self.forecaster.bucket_s, self.forecaster.bucket_s
            )
            for k in range(12)
        ]
        pipe = self.client.pipeline(transaction=False)
        pipe.rpush(samples_key(deployment), json.dumps(asdict(sample)))
        pipe.hincrbyfloat(buckets_key(deployment), f"{bucket}:s", sample.demand)
        pipe.hincrbyfloat(buckets_key(deployment), f"{bucket}:n", 1)
        pipe.hdel(buckets_key(deployment), *(f"{b}:{f}" for b in expired for f in "sn"))
        pipe.execute()
        self._trim(deployment, sample.at)

    def _trim(self, deployment: str, now: float) -> None:
        """Drop samples older than RAW_KEEP_S from the head of the list."""
        key = samples_key(deployment)
        while True:
            head = self.client.lindex(key, 0)
            if head is None or json.loads(str(head))["at"] >= now - RAW_KEEP_S:
                return
            self.client.lpop(key)

    def samples(self, deployment: str) -> list[Sample]:
        raw: Sequence[str] = self.client.lrange(samples_key(deployment), 0, -1)  # type: ignore[assignment]
        return sorted((Sample(**json.loads(item)) for item in raw), key=lambda s: s.at)

    def buckets(self, deployment: str, now: float, horizon_s: float) -> dict[int, float]:
        """The buckets the forecast reads: around now - period, over the horizon."""
        size = self.forecaster.bucket_s
        wanted = sorted(
            {
                bucket_start(now - period + offset, size)
                for period in self.forecaster.periods
                for offset in _offsets(horizon_s, size)
            }
        )
        if not wanted:
            return {}
        fields = [f"{b}:{f}" for b in wanted for f in "sn"]
        values: list[str | None] = self.client.hmget(buckets_key(deployment), fields)  # type: ignore[assignment]
        out = {}
        for i, start in enumerate(wanted):
            total, count = values[2 * i], values[2 * i + 1]
            if total is not None and count is not None and float(count) > 0:
                out[start] = float(total) / float(count)
        return out


def _offsets(horizon_s: float, size: float) -> list[float]:
    steps = int(horizon_s // size) + 3
    return [(k - 1) * size for k in range(steps)]
