"""The autoscaler's decision: a pure function of policy, recent samples, fleet and clock.

Rules, in order (docs/autoscaling.md explains each):

1. min/max replicas are enforced at once, ignoring windows and cooldowns;
2. scale up when utilisation, queue or P99 TTFT has been over its threshold for the whole
   scale_up_window_s (reactive), or, in predictive mode, when the forecast peak over the
   next start-up time would put utilisation over the threshold;
3. scale down when utilisation has been under scale_down_utilisation for the whole
   scale_down_window_s, or, in predictive mode, when every sample of that window and the
   forecast fit in fewer replicas at the target utilisation; that window must lie after
   the last step up;
4. a step sizes the fleet for target_utilisation, which lies strictly between the two
   thresholds: that gap (hysteresis), the windows and the cooldowns stop flapping;
5. capacity is added from the cheapest source first: a draining replica is put back, then
   a warm one is promoted (instant), then a sleeping warm one is woken (seconds: vLLM's
   sleep mode), and only then is a new one started;
6. capacity is removed by draining (no new requests); a replica is stopped only once it is
   not loading and has no streams in flight.
"""

import math
from collections.abc import Callable, Sequence

from scaling.autoscale.pool import pick_drains, promotions, wakes, with_warm_pool
from scaling.autoscale.types import (
    READY,
    STARTING,
    Decision,
    FleetState,
    Forecast,
    LastActions,
    PolicySpec,
    Sample,
)

MAX_STEP_FACTOR = 2
MIN_STEP_CAP = 4
MAX_SAMPLE_GAP_S = 90.0  # a longer silence means the condition was not observed: window restarts


def decide(
    policy: PolicySpec,
    history: Sequence[Sample],
    fleet: FleetState,
    now: float,
    last: LastActions,
    forecast: Forecast | None = None,
) -> Decision:
    """history: this deployment's samples, oldest first; forecast: predictive mode only."""
    decision = _scale(policy, history, fleet, now, last, forecast if policy.predictive else None)
    return with_warm_pool(policy, fleet, decision)


def needed(policy: PolicySpec, demand: float) -> int:
    """Replicas that carry this many requests in flight at the target utilisation."""
    per_replica = policy.slots_per_replica * policy.target_utilisation
    return max(math.ceil(demand / per_replica - 1e-9), 0)


def sizing_demand(sample: Sample) -> float:
    """Requests in flight to size for. A queue is a backlog, not a rate: once capacity
    arrives it drains, so it counts at most as much again as what is running (otherwise a
    minute of saturation would size the fleet for the backlog and run it to max_replicas)."""
    running = sample.demand - sample.queue
    return min(sample.demand, 2 * running) if running > 0 else sample.demand


def held_for(history: Sequence[Sample], now: float, condition: Callable[[Sample], bool]) -> float:
    """How long the condition has held without a break, up to now (0 if not now)."""
    since, previous = None, now
    for sample in reversed(history):
        if sample.at > now:
            continue
        if previous - sample.at > MAX_SAMPLE_GAP_S or not condition(sample):
            break
        since = previous = sample.at
    return 0.0 if since is None else now - since


def _scale(
    policy: PolicySpec,
    history: Sequence[Sample],
    fleet: FleetState,
    now: float,
    last: LastActions,
    forecast: Forecast | None,
) -> Decision:
    n = fleet.serving
    base = _inputs(policy, history, fleet, forecast)
    if n < policy.min_replicas:
        return _up(
            policy,
            fleet,
            policy.min_replicas,
            "min_replicas",
            f"{n} serving is below min_replicas {policy.min_replicas}",
            base,
        )
    if n > policy.max_replicas:
        return _down(
            policy,
            fleet,
            policy.max_replicas,
            "max_replicas",
            f"{n} serving is above max_replicas {policy.max_replicas}",
            base,
        )
    if not history:
        return _hold(n, "no_samples", "no samples yet: nothing measured to act on", base)
    up = _up_trigger(policy, history, n, now, forecast)
    if up is not None:
        return _gated_up(policy, fleet, history[-1], now, last, forecast, up, base)
    down = _down_trigger(policy, history, n, now, last, forecast)
    if down is not None:
        return _gated_down(policy, fleet, history, now, last, forecast, down, base)
    return _hold(n, "within_band", _band_reason(policy, history[-1], n), base)


def _up_condition(policy: PolicySpec) -> Callable[[Sample], bool]:
    def over(s: Sample) -> bool:
        slow = s.ttft_p99_s is not None and s.ttft_p99_s > policy.ttft_p99_target_s
        busy = s.utilisation > policy.scale_up_utilisation
        return busy or s.queue > policy.scale_up_queue or slow

    return over


def _up_trigger(
    policy: PolicySpec, history: Sequence[Sample], n: int, now: float, forecast: Forecast | None
) -> tuple[str, str] | None:
    latest = history[-1]
    if n == 0 and latest.demand > 0:
        return "from_zero", f"{latest.demand:.0f} requests in flight and no replica serving"
    held = held_for(history, now, _up_condition(policy))
    if held >= policy.scale_up_window_s:
        return (
            "sustained_up",
            f"{_over_signals(policy, latest)} for {held:.0f} s "
            f"(window {policy.scale_up_window_s:.0f} s)",
        )
    if forecast is not None and n > 0:
        expected = forecast.value / (n * policy.slots_per_replica)
        if expected > policy.scale_up_utilisation:
            return "forecast_up", (
                f"forecast: {forecast.explanation} = utilisation "
                f"{expected:.2f} on {n} serving > "
                f"{policy.scale_up_utilisation:.2f}"
            )
    return None


def _down_trigger(
    policy: PolicySpec,
    history: Sequence[Sample],
    n: int,
    now: float,
    last: LastActions,
    forecast: Forecast | None,
) -> tuple[str, str] | None:
    window = policy.scale_down_window_s
    if last.up_at is not None and now - last.up_at < window:
        return None  # the quiet window starts again at every step up: it must follow it
    held = held_for(history, now, lambda s: s.utilisation < policy.scale_down_utilisation)
    if held >= window:
        return "sustained_down", (
            f"utilisation < {policy.scale_down_utilisation:.2f} "
            f"for {held:.0f} s (window {window:.0f} s)"
        )
    if forecast is None or needed(policy, forecast.value) >= n:
        return None
    held = held_for(history, now, lambda s: needed(policy, s.demand) < n)
    if held >= window:
        return "forecast_down", (
            f"every sample for {held:.0f} s and the forecast "
            f"({forecast.explanation}) fit in fewer than {n} replicas "
            f"at {policy.target_utilisation:.2f}"
        )
    return None


def _gated_up(
    policy: PolicySpec,
    fleet: FleetState,
    latest: Sample,
    now: float,
    last: LastActions,
    forecast: Forecast | None,
    trigger: tuple[str, str],
    base: dict[str, object],
) -> Decision:
    n, (rule, why) = fleet.serving, trigger
    wait = _remaining(last.up_at, policy.scale_up_cooldown_s, now)
    if wait > 0 and rule != "from_zero":
        return _hold(n, "up_cooldown", f"{why}; but in scale-up cooldown for {wait:.0f} s", base)
    demand = max(sizing_demand(latest), forecast.value if forecast else 0.0)
    starting = len(fleet.in_state(STARTING))
    if starting and needed(policy, demand) <= n:
        return _hold(
            n,
            "capacity_starting",
            f"{why}; but {starting} starting replicas "
            f"will carry {demand:.0f} in flight once loaded",
            base,
        )
    target = min(max(n + 1, needed(policy, demand)), _step_cap(n), policy.max_replicas)
    if target <= n:
        return _hold(n, "at_max", f"{why}; but already at max_replicas {n}", base)
    return _up(
        policy,
        fleet,
        target,
        rule,
        f"{why}; {demand:.0f} in flight needs "
        f"{needed(policy, demand)} at {policy.target_utilisation:.2f}",
        base,
    )


def _gated_down(
    policy: PolicySpec,
    fleet: FleetState,
    history: Sequence[Sample],
    now: float,
    last: LastActions,
    forecast: Forecast | None,
    trigger: tuple[str, str],
    base: dict[str, object],
) -> Decision:
    n, (rule, why) = fleet.serving, trigger
    if n <= policy.min_replicas:
        return _hold(n, "at_min", f"{why}; but already at min_replicas {n}", base)
    recent = max(_latest_action(last), default=None)
    wait = _remaining(recent, policy.scale_down_cooldown_s, now)
    if wait > 0:
        return _hold(
            n, "down_cooldown", f"{why}; but in scale-down cooldown for {wait:.0f} s", base
        )
    window = [s.demand for s in history if s.at >= now - policy.scale_down_window_s]
    peak = max([*window, forecast.value if forecast else 0.0])
    target = max(needed(policy, peak), policy.min_replicas)
    if target >= n:
        return _hold(
            n,
            "peak_needs_all",
            f"{why}; but the window's peak {peak:.0f} in flight needs all {n}",
            base,
        )
    return _down(
        policy, fleet, target, rule, f"{why}; peak {peak:.0f} in flight needs {target}", base
    )


def _up(
    policy: PolicySpec, fleet: FleetState, target: int, rule: str, why: str, base: dict[str, object]
) -> Decision:
    n = fleet.serving
    promote = promotions(fleet, target - n)
    wake = wakes(fleet, promote)
    start = target - n - len(promote)
    woken = f" (wake {list(wake)} from sleep)" if wake else ""
    how = f"put back/promote {len(promote)}{woken}, start {start}"
    return Decision(
        action="up",
        rule=rule,
        from_replicas=n,
        to_replicas=target,
        reason=f"{why}; {n} -> {target} serving ({how})",
        promote=promote,
        wake=wake,
        start=start,
        spot=policy.spot,
        inputs=base,
    )


def _down(
    policy: PolicySpec, fleet: FleetState, target: int, rule: str, why: str, base: dict[str, object]
) -> Decision:
    n = fleet.serving
    drain = pick_drains(fleet, n - target)
    reached = n - len(drain)
    loading = (
        ""
        if reached == target
        else f" ({reached - target} loading or not started by the autoscaler, kept)"
    )
    return Decision(
        action="down" if drain else "hold",
        rule=rule if drain else "all_loading",
        from_replicas=n,
        to_replicas=reached,
        reason=f"{why}; {n} -> {reached} serving, drain {list(drain)}{loading}",
        drain=drain,
        inputs=base,
    )


def _hold(n: int, rule: str, why: str, base: dict[str, object]) -> Decision:
    return Decision(
        action="hold", rule=rule, from_replicas=n, to_replicas=n, reason=why, inputs=base
    )


def _step_cap(n: int) -> int:
    """At most double (or +4) per step: a queue backlog inflates demand only until the new
    replicas drain it, and the next tick can add more if the need is real."""
    return max(n * MAX_STEP_FACTOR, n + MIN_STEP_CAP)


def _remaining(since: float | None, cooldown: float, now: float) -> float:
    return 0.0 if since is None else since + cooldown - now


def _latest_action(last: LastActions) -> list[float]:
    return [t for t in (last.up_at, last.down_at) if t is not None]


def _over_signals(policy: PolicySpec, s: Sample) -> str:
    parts = []
    if s.utilisation > policy.scale_up_utilisation:
        parts.append(f"utilisation {s.utilisation:.2f} > {policy.scale_up_utilisation:.2f}")
    if s.queue > policy.scale_up_queue:
        parts.append(f"queue {s.queue:.0f}{_in_gateway(s)} > {policy.scale_up_queue}")
    if s.ttft_p99_s is not None and s.ttft_p99_s > policy.ttft_p99_target_s:
        parts.append(f"P99 TTFT {s.ttft_p99_s:.2f} s > {policy.ttft_p99_target_s:.2f} s")
    return " and ".join(parts) or "over threshold"


def _band_reason(policy: PolicySpec, s: Sample, n: int) -> str:
    return (
        f"within band: utilisation {s.utilisation:.2f} on {n} serving (down < "
        f"{policy.scale_down_utilisation:.2f}, up > {policy.scale_up_utilisation:.2f}), "
        f"queue {s.queue:.0f}{_in_gateway(s)} (up > {policy.scale_up_queue})"
    )


def _in_gateway(s: Sample) -> str:
    return f" ({s.gateway_queue:.0f} in the gateway)" if s.gateway_queue else ""


def _inputs(
    policy: PolicySpec, history: Sequence[Sample], fleet: FleetState, forecast: Forecast | None
) -> dict[str, object]:
    latest = history[-1] if history else None
    counts = {
        state: len(fleet.in_state(state)) for state in (READY, "starting", "warm", "draining")
    }
    counts["asleep"] = sum(1 for w in fleet.workers if w.asleep)
    inputs: dict[str, object] = {"mode": policy.mode, "fleet": counts}
    if latest is not None:
        inputs["sample"] = {
            "utilisation": round(latest.utilisation, 4),
            "queue": latest.queue,
            "gateway_queue": latest.gateway_queue,
            "demand": round(latest.demand, 2),
            "ttft_p99_s": latest.ttft_p99_s,
        }
    if forecast is not None:
        inputs["forecast"] = {
            "value": round(forecast.value, 2),
            "level": round(forecast.level, 2),
            "trend_per_s": round(forecast.trend_per_s, 5),
            "seasonal_ratio": forecast.seasonal_ratio,
            "horizon_s": forecast.horizon_s,
        }
    return inputs
