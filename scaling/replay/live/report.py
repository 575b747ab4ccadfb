"""What a live replay measured: SLO attainment, TTFT, GPU-hours, and every scaling step.

LiveResult carries the simulated replay's ReplayResult shape (requests, met, GPU-hours,
cost, events), so the live rows and the simulated-time prediction print side by side,
plus what only a live run has: TTFTs, errors, the driver's lag and each process's life.
Times are reported in trace seconds from the window's start, as the simulated replay does.

GPU-hours count every replica-second from start to stop, asleep or not: a replica in
vLLM's sleep mode frees its GPU memory, but its process keeps the device (a pod keeps its
`nvidia.com/gpu`, a host its card), so that is what is paid for and what the oracle's
figure is compared with. The hours asleep are reported beside them (asleep_seconds,
awake_gpu_hours): the GPU time sleep mode hands back where the freed memory serves
something else on the same GPU.
"""

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from inference.models import ModelDeployment
from scaling.autoscale.types import PolicySpec
from scaling.models import ScalingDecision
from scaling.replay.live.driver import LoadDriver
from scaling.replay.live.options import LiveOptions
from scaling.replay.live.processes import ReplicaLife
from scaling.replay.simulated import ReplayResult


@dataclass
class LiveResult:
    replay: ReplayResult  # requests, met, gpu_hours, cost, events: the simulated replay's shape
    mode: str
    speed: float
    rate_scale: float
    sent: int = 0  # requests the driver sent in the measured window
    measured: int = 0  # of those, ended on their own (a first token or an error; not cut)
    errors: dict[str, int] = field(default_factory=dict)
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    driver_lag_p99_s: float = 0.0
    replica_seconds: float = 0.0  # wall
    peak_serving: int = 0
    replicas: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[dict[str, float]] = field(default_factory=list)
    tick_errors: int = 0
    wall_s: float = 0.0
    label: str = ""  # the warm pool variant (scaling/replay/live/pools.py), if one
    asleep_seconds: float = 0.0  # wall, of replica_seconds: in sleep mode (no GPU memory)
    wakes_s: list[float] = field(default_factory=list)  # wall, each wake from sleep mode

    @property
    def awake_gpu_hours(self) -> float:
        """GPU-hours without the hours asleep (the module docstring says why both)."""
        return (self.replica_seconds - self.asleep_seconds) * self.speed / 3600

    @property
    def startup_s(self) -> list[float]:
        """Measured start -> first healthy scrape, wall seconds, for replicas the loop
        started (not the initial fleet)."""
        return [
            r["ready_after_s"]
            for r in self.replicas
            if not r["initial"] and r["ready_after_s"] is not None
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "controller": self.mode,
            "pool": self.label,
            "live": True,
            "speed": self.speed,
            "rate_scale": self.rate_scale,
            "requests": self.replay.requests,
            "sent": self.sent,
            "measured": self.measured,
            "met": self.replay.met,
            "attainment": self.replay.attainment,
            "errors": self.errors,
            "ttft_p50_s": self.ttft_p50_s,
            "ttft_p99_s": self.ttft_p99_s,
            "driver_lag_p99_s": self.driver_lag_p99_s,
            "replica_seconds": self.replica_seconds,
            "gpu_hours": self.replay.gpu_hours,
            "asleep_seconds": self.asleep_seconds,
            "awake_gpu_hours": self.awake_gpu_hours,
            "wakes_s": self.wakes_s,
            "cost": self.replay.cost,
            "ups": self.replay.count("up"),
            "downs": self.replay.count("down"),
            "reversals_30m": self.replay.reversals,
            "peak_serving": self.peak_serving,
            "startup_s": self.startup_s,
            "events": self.replay.events,
            "decisions": self.decisions,
            "replicas": self.replicas,
            "timeline": self.timeline,
            "tick_errors": self.tick_errors,
            "wall_s": self.wall_s,
        }


def live_result(
    *,
    policy: PolicySpec,
    options: LiveOptions,
    rate_scale: float,
    driver: LoadDriver,
    lives: list[ReplicaLife],
    timeline: list[dict[str, float]],
    tick_errors: int,
    deployment: ModelDeployment,
    wall_s: float,
    label: str = "",
) -> LiveResult:
    """The result of one run, from the driver's requests, the replicas' lives, the
    loop's timeline and the deployment's ScalingDecision rows."""
    target, speed = options.ttft_target_s, options.speed
    requests = driver.requests
    done = [r for r in requests if (r.ttft_s is not None or r.error) and r.error != "cancelled"]
    met = sum(1 for r in requests if r.ttft_s is not None and r.ttft_s <= target and not r.error)
    ttfts = sorted(r.ttft_s for r in requests if r.ttft_s is not None)
    replica_s, asleep_s, replicas = 0.0, 0.0, []
    end = driver.t_end or time.monotonic()
    for life in lives:
        stopped = life.stopped if life.stopped is not None else end
        replica_s += max(min(stopped, end) - max(life.started, driver.t0), 0.0)
        asleep_s += life.asleep_within(driver.t0, end)
        replicas.append(
            {
                "url": life.url,
                "pid": life.pid,
                "initial": life.initial,
                "warm": life.warm,
                "started_s": _trace_s(driver, options, life.started),
                "ready_after_s": None if life.ready is None else life.ready - life.started,
                "stopped_s": None
                if life.stopped is None
                else _trace_s(driver, options, life.stopped),
                "exited_on_its_own": life.exited,
                "asleep_s": [
                    [
                        _trace_s(driver, options, since),
                        None if until is None else _trace_s(driver, options, until),
                    ]
                    for since, until in life.asleep
                ],
                "wakes_s": life.wakes_s,
            }
        )
    gpu_hours = replica_s * speed / 3600
    events, decisions = _events(deployment, driver, options)
    replay = ReplayResult(
        name=f"{policy.mode} {label} (live)" if label else f"{policy.mode} (live)",
        requests=float(len(requests)),
        met=float(met),
        gpu_hours=gpu_hours,
        cost=gpu_hours * options.gpu_cost_per_hour,
        events=events,
    )
    errors = Counter(r.error for r in requests if r.error)
    return LiveResult(
        replay=replay,
        mode=policy.mode,
        speed=speed,
        rate_scale=rate_scale,
        sent=len(requests),
        measured=len(done),
        errors=dict(errors),
        ttft_p50_s=_quantile(ttfts, 0.5),
        ttft_p99_s=_quantile(ttfts, 0.99),
        driver_lag_p99_s=_quantile(sorted(r.lag_s for r in requests), 0.99) or 0.0,
        replica_seconds=replica_s,
        peak_serving=max((int(p["serving"]) for p in timeline if p["t"] >= 0), default=0),
        replicas=replicas,
        decisions=decisions,
        timeline=[{**p, "t": round(p["t"] * speed + options.start_s, 1)} for p in timeline],
        tick_errors=tick_errors,
        wall_s=wall_s,
        label=label,
        asleep_seconds=asleep_s,
        wakes_s=[took for life in lives for took in life.wakes_s],
    )


def _trace_s(driver: LoadDriver, options: LiveOptions, monotonic: float) -> float:
    return round((monotonic - driver.t0) * options.speed + options.start_s, 1)


def _events(
    deployment: ModelDeployment, driver: LoadDriver, options: LiveOptions
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Steps from the ScalingDecision rows, in trace seconds; and every recorded
    decision in the window with its reason."""
    rows = ScalingDecision.objects.filter(deployment=deployment).order_by("at")
    events, decisions = [], []
    end_wall = driver.wall_t0 + (driver.t_end - driver.t0)
    for row in rows:
        wall = row.at.timestamp()
        if not driver.wall_t0 <= wall <= end_wall:
            continue
        t = round((wall - driver.wall_t0) * options.speed + options.start_s, 1)
        decisions.append(
            {
                "t": t,
                "action": row.action,
                "rule": row.rule,
                "from": row.from_replicas,
                "to": row.to_replicas,
                "reason": row.reason,
                "actuated": row.actuated,
                "error": row.error,
            }
        )
        if row.action in ("up", "down") and row.actuated:
            events.append(
                {
                    "t": t,
                    "action": row.action,
                    "from": row.from_replicas,
                    "to": row.to_replicas,
                    "rule": row.rule,
                }
            )
    return events, decisions


def _quantile(ordered: list[float], q: float) -> float | None:
    if not ordered:
        return None
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]
