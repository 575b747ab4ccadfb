"""The plain values the autoscaler's pure decision function reads and returns.

No Django here: the live loop, the trace replay and the tests all build these, so the
same decide() runs against a real fleet and against a simulated one.
"""

from dataclasses import dataclass, field
from typing import Any

READY, STARTING, WARM, DRAINING, DEAD = "ready", "starting", "warm", "draining", "dead"


@dataclass(frozen=True)
class PolicySpec:
    """The thresholds of an AutoscalePolicy plus the two deployment facts decide() needs."""

    min_replicas: int = 1
    max_replicas: int = 8
    warm_pool: int = 0
    target_utilisation: float = 0.7
    scale_up_utilisation: float = 0.8
    scale_up_queue: int = 1000
    ttft_p99_target_s: float = 2.0
    scale_up_window_s: float = 60.0
    scale_down_utilisation: float = 0.3
    scale_down_window_s: float = 900.0
    scale_up_cooldown_s: float = 60.0
    scale_down_cooldown_s: float = 300.0
    startup_time_s: float = 180.0
    mode: str = "predictive"
    allow_spot: bool = False
    tier: str = "small"
    slots_per_replica: int = 64  # the deployment's max_in_flight_per_worker
    # Warm replicas sleep (vLLM's sleep mode: no GPU memory, woken in seconds) where the
    # worker was started able to (WorkerState.can_sleep).
    warm_sleeps: bool = False

    @property
    def predictive(self) -> bool:
        return self.mode == "predictive"

    @property
    def spot(self) -> bool:
        """Spot capacity is only ever used for the batch tier, whatever the row says."""
        return self.allow_spot and self.tier == "batch"


@dataclass(frozen=True)
class Sample:
    """One observation of a deployment, taken each tick from the scraped fleet snapshot.

    demand is requests in flight (running + waiting): by Little's law it is arrival rate
    times time in system, so it sizes the fleet directly in batch slots. queue and demand
    both include gateway_queue, the requests waiting in the gateways' dispatch queues.
    """

    at: float
    utilisation: float
    queue: float
    demand: float
    ttft_p99_s: float | None = None
    serving: int = 0
    gateway_queue: float = 0.0  # of queue: waiting in the gateways, not on the workers


@dataclass(frozen=True)
class WorkerState:
    id: int
    state: str
    in_flight: float = 0.0  # running + waiting on this worker, from the last scrape
    healthy: bool = True  # answers health checks (so a warm one has finished loading)
    spot: bool = False
    since: float = 0.0  # when it entered its state
    observed_at: float = 0.0  # when in_flight was scraped
    managed: bool = True  # started by an actuator; others (SLUICE_WORKERS) are never drained
    can_sleep: bool = False  # started with sleep mode (POST /sleep, /wake_up answer)
    asleep: bool = False  # in sleep mode: holds no GPU memory, serves nothing until woken


@dataclass(frozen=True)
class FleetState:
    workers: tuple[WorkerState, ...] = ()

    def in_state(self, *states: str) -> list[WorkerState]:
        return [w for w in self.workers if w.state in states]

    @property
    def serving(self) -> int:
        """Replicas in rotation or on their way into it (a starting one is capacity coming)."""
        return len(self.in_state(READY, STARTING))


@dataclass(frozen=True)
class LastActions:
    up_at: float | None = None
    down_at: float | None = None


@dataclass(frozen=True)
class Forecast:
    """Expected peak demand (requests in flight) over the next horizon_s, and why."""

    value: float
    level: float
    trend_per_s: float
    seasonal_ratio: float | None
    horizon_s: float
    explanation: str


@dataclass(frozen=True)
class Decision:
    """What to do now. from/to count serving replicas (ready + starting)."""

    action: str  # up | down | hold | warm | drain
    rule: str
    from_replicas: int
    to_replicas: int
    reason: str
    promote: tuple[int, ...] = ()  # warm or draining workers put (back) into rotation
    start: int = 0  # new replicas for traffic
    start_warm: int = 0  # new replicas for the warm pool
    spot: bool = False
    drain: tuple[int, ...] = ()  # ready -> draining (no new requests)
    stop: tuple[int, ...] = ()  # stop now: not loading, no streams in flight
    to_warm: tuple[int, ...] = ()  # drained replicas kept, out of traffic, as the warm pool
    wake: tuple[int, ...] = ()  # sleeping warm replicas to wake (those promoted: first)
    sleep: tuple[int, ...] = ()  # warm replicas (or ones going warm now) to put to sleep
    inputs: dict[str, Any] = field(default_factory=dict)

    @property
    def changes_fleet(self) -> bool:
        return bool(
            self.promote
            or self.start
            or self.start_warm
            or self.drain
            or self.stop
            or self.to_warm
            or self.wake
            or self.sleep
        )
