"""Replay a demand trace through the analytical fleet (autoscale_sim) under a controller:
the real autoscaler (reactive or predictive), or an oracle that knows the future.

The oracle is the yardstick for GPU-hours: it sees the expected load of every second in
advance, starts each replica exactly one start-up time before it is needed, drains the
moment capacity is no longer needed within a start-up time, keeps no warm pool, and runs
every replica as full as the policy allows (its scale-up utilisation, not the lower
target a scaling step aims for). It is not clairvoyant about Poisson noise.
"""

import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scaling.autoscale.decide import decide, needed
from scaling.autoscale.forecast import Forecaster, bucket_start
from scaling.autoscale.pool import drained, pick_drains
from scaling.autoscale.types import Decision, LastActions, PolicySpec, Sample
from scaling.replay.analytical_fleet import FleetModel, SimFleet
from scaling.replay.traces import Demand

REVERSAL_WINDOW_S = 1800.0  # a change of direction sooner than this after a step: a reversal


@dataclass
class ReplayResult:
    name: str
    requests: float = 0.0
    met: float = 0.0
    gpu_hours: float = 0.0
    cost: float = 0.0
    events: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[tuple[float, int, int]] = field(default_factory=list)  # t, serving, ready

    @property
    def attainment(self) -> float:
        return self.met / self.requests if self.requests else 1.0

    def count(self, action: str) -> int:
        return sum(1 for e in self.events if e["action"] == action)

    @property
    def reversals(self) -> int:
        """Direction changes (up then down, or down then up) within REVERSAL_WINDOW_S."""
        steps = [e for e in self.events if e["action"] in ("up", "down")]
        return sum(
            1
            for a, b in itertools.pairwise(steps)
            if a["action"] != b["action"] and b["t"] - a["t"] < REVERSAL_WINDOW_S
        )


class Controller:
    """Decides, once per simulated second, what the fleet should do."""

    name = "controller"

    def on_second(self, t: float, fleet: SimFleet, service_s: float) -> None:
        raise NotImplementedError

    def initial_replicas(self, expected_in_flight: float) -> int:
        """The fleet a replay starts with, already sized for the trace's first minute."""
        policy = self.policy
        count = needed(policy, expected_in_flight)
        return min(max(count, policy.min_replicas), policy.max_replicas)

    def record(self, t: float, action: str, before: int, after: int, rule: str) -> None:
        self.events.append({"t": t, "action": action, "from": before, "to": after, "rule": rule})

    events: list[dict[str, Any]]
    policy: PolicySpec


class AutoscalerController(Controller):
    """The production decide() and forecast, ticking every tick_s of simulated time."""

    def __init__(
        self, policy: PolicySpec, forecaster: Forecaster | None = None, tick_s: int = 15
    ) -> None:
        self.policy, self.tick_s = policy, tick_s
        self.forecaster = forecaster or Forecaster()
        self.name = policy.mode
        longest = max(policy.scale_down_window_s, *self.forecaster.trend_windows_s)
        keep = int(longest / tick_s) + 8
        self.history: deque[Sample] = deque(maxlen=keep)
        self.sums: dict[int, list[float]] = {}
        self.buckets: dict[int, float] = {}
        self.last = LastActions()
        self.events = []
        self.decisions: list[Decision] = []

    def on_second(self, t: float, fleet: SimFleet, service_s: float) -> None:
        if int(t) % self.tick_s:
            return
        sample = fleet.sample(t)
        self.history.append(sample)
        self._bucket(sample)
        forecast = None
        if self.policy.predictive:
            horizon = self.policy.startup_time_s + self.tick_s
            forecast = self.forecaster.forecast(self.history, self.buckets, t, horizon)
        decision = decide(self.policy, self.history, fleet.fleet_state(t), t, self.last, forecast)
        apply(decision, fleet, t, service_s)
        if decision.action in ("up", "down"):
            self.decisions.append(decision)
            self.record(
                t, decision.action, decision.from_replicas, decision.to_replicas, decision.rule
            )
            self.last = (
                LastActions(up_at=t, down_at=self.last.down_at)
                if decision.action == "up"
                else LastActions(up_at=self.last.up_at, down_at=t)
            )

    def _bucket(self, sample: Sample) -> None:
        key = bucket_start(sample.at, self.forecaster.bucket_s)
        total = self.sums.setdefault(key, [0.0, 0.0])
        total[0] += sample.demand
        total[1] += 1
        self.buckets[key] = total[0] / total[1]


class OracleController(Controller):
    """Perfect foresight of the expected load (see the module docstring)."""

    name = "oracle"

    def __init__(self, policy: PolicySpec, demand: Demand, model: FleetModel) -> None:
        self.policy, self.model, self.events = policy, model, []
        required = [self._required(demand, t) for t in range(demand.seconds + 1)]
        self.start_for = required  # capacity that must be serving at second t
        self.keep = _window_max(required, int(model.startup_time_s) + 1)

    def initial_replicas(self, expected_in_flight: float) -> int:
        return self.start_for[0]

    def _required(self, demand: Demand, t: int) -> int:
        expected = demand.in_flight(t, self.model.base_ttft_s, self.model.per_token_s)
        full = self.policy.slots_per_replica * self.policy.scale_up_utilisation
        count = math.ceil(expected / full - 1e-9)
        return min(max(count, self.policy.min_replicas), self.policy.max_replicas)

    def on_second(self, t: float, fleet: SimFleet, service_s: float) -> None:
        second = max(int(t), 0)
        if fleet.by_state["draining"]:
            for worker in fleet.fleet_state(t).workers:
                if drained(worker):
                    fleet.stop(worker.id, t)
        serving = fleet.serving()
        ahead = self.start_for[
            min(second + int(self.model.startup_time_s), len(self.start_for) - 1)
        ]
        if serving < ahead:
            for _ in range(ahead - serving):
                fleet.start(t, spot=self.policy.spot)
            self.record(t, "up", serving, ahead, "oracle")
        elif serving > self.keep[min(second, len(self.keep) - 1)]:
            target = self.keep[min(second, len(self.keep) - 1)]
            drains = pick_drains(fleet.fleet_state(t), serving - target)
            for worker_id in drains:
                fleet.drain(worker_id, t, service_s)
            if drains:
                self.record(t, "down", serving, serving - len(drains), "oracle")


def apply(decision: Decision, fleet: SimFleet, t: float, service_s: float) -> None:
    """Carry a decision out on the simulated fleet (what an actuator does for real)."""
    for worker_id in decision.promote:
        fleet.promote(worker_id, t)
    for _ in range(decision.start):
        fleet.start(t, spot=decision.spot)
    for _ in range(decision.start_warm):
        fleet.start(t, warm=True, spot=decision.spot)
    for worker_id in decision.drain:
        fleet.drain(worker_id, t, service_s)
    for worker_id in decision.to_warm:
        fleet.keep_warm(worker_id, t)
    for worker_id in decision.stop:
        fleet.stop(worker_id, t)


def replay(
    demand: Demand,
    model: FleetModel,
    controller: Controller,
    policy: PolicySpec,
    seed: int = 0,
    measure_from_s: float = 0.0,
    tail_s: int = 600,
    warmup_s: int = 900,
) -> ReplayResult:
    """Run the trace (Poisson arrivals, seeded: every controller sees the same requests)."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(np.asarray(demand.rate)).tolist()
    lead_in = rng.poisson(demand.rate[0] if demand.rate else 0.0, size=warmup_s).tolist()
    fleet = SimFleet(model)
    _initial_fleet(fleet, demand, model, controller, at=warmup_s)
    before = demand.in_flight(0, model.base_ttft_s, model.per_token_s) - demand.rate[0]
    fleet.preload(-warmup_s, max(before, 0.0), _service(demand, model, 0))
    result = ReplayResult(name=controller.name)
    gpu_before = cost_before = requests_before = met_before = 0.0
    gpu_end = cost_end = 0.0
    for second in range(-warmup_s, demand.seconds + tail_s):  # the tail drains the queue
        t = float(second)
        if second < 0:  # lead-in at the first second's rate: streams and samples settle
            fleet.step(t, lead_in[second], _service(demand, model, 0))
            controller.on_second(t, fleet, _service(demand, model, 0))
            continue
        if second == 0:
            fleet.requests = fleet.met = fleet.gpu_seconds = fleet.cost = 0.0
        if second == int(measure_from_s) and second > 0:
            gpu_before, cost_before = fleet.gpu_seconds, fleet.cost
            requests_before, met_before = fleet.requests, fleet.met
        if second == demand.seconds:
            gpu_end, cost_end = fleet.gpu_seconds, fleet.cost
        inside = second < demand.seconds
        service = _service(demand, model, second)
        fleet.step(t, counts[second] if inside else 0, service)
        controller.on_second(t, fleet, service)
        if second % 60 == 0:
            result.timeline.append((t, fleet.serving(), fleet.ready()))
    result.requests, result.met = fleet.requests - requests_before, fleet.met - met_before
    result.gpu_hours = (gpu_end - gpu_before) / 3600
    result.cost = cost_end - cost_before
    result.events = [e for e in controller.events if e["t"] >= measure_from_s]
    return result


def _service(demand: Demand, model: FleetModel, second: int) -> float:
    """Seconds a request holds its slot: first token, then one step per output token."""
    tokens = demand.output_tokens[second] if 0 <= second < demand.seconds else 0.0
    return model.base_ttft_s + model.per_token_s * (tokens or 200)


def _initial_fleet(
    fleet: SimFleet, demand: Demand, model: FleetModel, controller: Controller, at: float
) -> None:
    """Start as a fleet that was already sized for the trace's first minute."""
    policy = controller.policy
    expected = max(demand.in_flight(t, model.base_ttft_s, model.per_token_s) for t in range(60))
    for _ in range(controller.initial_replicas(expected)):
        fleet.promote(fleet.start(-at - model.startup_time_s, spot=policy.spot), -at)
    warm = 0 if isinstance(controller, OracleController) else policy.warm_pool
    for _ in range(warm):
        fleet.start(-at - model.startup_time_s, warm=True, spot=policy.spot)


def _window_max(values: list[int], width: int) -> list[int]:
    """out[t] = max(values[t : t + width]) (sliding window, O(n))."""
    out, window = [0] * len(values), deque[int]()
    for i in range(len(values) - 1, -1, -1):
        while window and values[window[-1]] <= values[i]:
            window.pop()
        window.append(i)
        while window[0] >= i + width:
            window.popleft()
        out[i] = values[window[0]]
    return out
