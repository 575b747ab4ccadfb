"""An analytical fleet in simulated time, for trace replay and the autoscaler's tests.

Not the simulator processes (inference/sim): a fluid model that replays a day in a second
or two. Each replica has slots_per_replica batch slots (the deployment's
max_in_flight_per_worker); a request holds one slot for base_ttft_s + output_tokens x
per_token_s; arrivals that find no free slot queue FIFO, and their TTFT is base_ttft_s
plus the whole seconds they waited. A replica costs GPU time from the moment it is
started (loading, warm, serving or draining) until it is stopped. Spot replicas cost
spot_price_share of the on-demand price and are never preempted here.
"""

import heapq
from collections import deque
from dataclasses import dataclass

from scaling.autoscale.types import (
    DEAD,
    DRAINING,
    READY,
    STARTING,
    WARM,
    FleetState,
    Sample,
    WorkerState,
)


@dataclass(frozen=True)
class FleetModel:
    slots_per_replica: int = 64
    base_ttft_s: float = 0.25  # h100-llama3-8b simulator profile at 64 concurrent streams
    per_token_s: float = 0.015
    startup_time_s: float = 180.0
    gpu_cost_per_hour: float = 4.0
    spot_price_share: float = 0.35
    ttft_target_s: float = 1.0


@dataclass
class SimWorker:
    id: int
    state: str
    since: float
    loaded_at: float
    spot: bool = False
    drain_until: float = 0.0
    streams: float = 0.0  # while draining: the streams it carried when the drain began


class SimFleet:
    """Workers, the FIFO queue and streams in service, advanced one second at a time."""

    def __init__(self, model: FleetModel) -> None:
        self.model = model
        self.workers: dict[int, SimWorker] = {}
        self.queue: deque[list[float]] = deque()  # [arrived_at, count, service_s]
        self.completions: list[tuple[float, float]] = []  # heap of (ends_at, count)
        self.in_service = 0.0
        self.requests = self.met = 0.0
        self.gpu_seconds = self.cost = 0.0
        self.any_spot = False
        self.recent_ttft: list[tuple[float, float]] = []  # (ttft, count) since last sample
        self.by_state: dict[str, set[int]] = {s: set() for s in (STARTING, WARM, READY, DRAINING)}
        self._next_id = 1

    # one simulated second

    def step(self, t: float, arrivals: float, service_s: float) -> None:
        self._advance_states(t)
        while self.completions and self.completions[0][0] <= t:
            self.in_service -= heapq.heappop(self.completions)[1]
        self.in_service = max(self.in_service, 0.0)
        if arrivals > 0:
            self.queue.append([t, arrivals, service_s])
        self._admit(t)
        self._bill()

    def _advance_states(self, t: float) -> None:
        for worker_id in list(self.by_state[STARTING]):
            worker = self.workers[worker_id]
            if t >= worker.loaded_at:
                self._set(worker, READY, t)

    def _set(self, worker: SimWorker, state: str, t: float) -> None:
        self.by_state[worker.state].discard(worker.id)
        worker.state, worker.since = state, t
        if state == DEAD:
            del self.workers[worker.id]
        else:
            self.by_state[state].add(worker.id)

    def _admit(self, t: float) -> None:
        free = self.ready() * self.model.slots_per_replica - self.serving_streams(t)
        while self.queue and free >= 1:
            arrived, count, service = self.queue[0]
            taken = min(count, float(int(free)))
            ttft = self.model.base_ttft_s + (t - arrived)
            self.requests += taken
            self.met += taken if ttft <= self.model.ttft_target_s else 0.0
            self.recent_ttft.append((ttft, taken))
            # a stream holds its slot for `service` seconds on average: split the cohort
            # between the two whole-second steps around it
            whole, part = int(service), service - int(service)
            heapq.heappush(self.completions, (t + whole, taken * (1 - part)))
            if part:
                heapq.heappush(self.completions, (t + whole + 1, taken * part))
            self.in_service += taken
            free -= taken
            if taken >= count:
                self.queue.popleft()
            else:
                self.queue[0][1] = count - taken

    def _bill(self) -> None:
        spot = sum(1 for w in self.workers.values() if w.spot) if self.any_spot else 0
        on_demand = len(self.workers) - spot
        self.gpu_seconds += len(self.workers)
        price = self.model.gpu_cost_per_hour / 3600
        self.cost += price * (on_demand + spot * self.model.spot_price_share)

    def preload(self, t: float, streams: float, service_s: float) -> None:
        """Start mid-stream: streams already in flight, ending evenly over one service time."""
        steps = int(service_s) + 1
        for k in range(1, steps + 1):
            heapq.heappush(self.completions, (t + k, streams / steps))
        self.in_service += streams

    # what the autoscaler observes

    def ready(self) -> int:
        return len(self.by_state[READY])

    def serving(self) -> int:
        return len(self.by_state[READY]) + len(self.by_state[STARTING])

    def draining_streams(self, t: float) -> float:
        return sum(self._left(self.workers[i], t) for i in self.by_state[DRAINING])

    def serving_streams(self, t: float) -> float:
        return max(self.in_service - self.draining_streams(t), 0.0)

    def queued(self) -> float:
        return sum(entry[1] for entry in self.queue)

    def sample(self, t: float) -> Sample:
        ready, streams, queued = self.ready(), self.serving_streams(t), self.queued()
        capacity = ready * self.model.slots_per_replica
        utilisation = min(streams / capacity, 1.0) if capacity else 0.0
        p99 = _weighted_quantile(self.recent_ttft, 0.99)
        self.recent_ttft = []
        serving = ready + len(self.by_state[STARTING])
        return Sample(
            at=t,
            utilisation=utilisation,
            queue=queued,
            demand=streams + queued,
            ttft_p99_s=p99,
            serving=serving,
        )

    def fleet_state(self, t: float) -> FleetState:
        ready = self.ready()
        per_ready = self.serving_streams(t) / ready if ready else 0.0
        views = []
        for w in self.workers.values():
            in_flight = per_ready if w.state == READY else self._left(w, t)
            views.append(
                WorkerState(
                    id=w.id,
                    state=w.state,
                    in_flight=in_flight,
                    healthy=t >= w.loaded_at,
                    spot=w.spot,
                    since=w.since,
                    observed_at=t,
                )
            )
        return FleetState(workers=tuple(views))

    def _left(self, worker: SimWorker, t: float) -> float:
        """A draining worker's streams end evenly over one service time (fluid model)."""
        if worker.state != DRAINING or t >= worker.drain_until:
            return 0.0
        span = worker.drain_until - worker.since
        return worker.streams * (worker.drain_until - t) / span if span > 0 else 0.0

    # what an actuator does

    def start(self, t: float, warm: bool = False, spot: bool = False) -> int:
        worker = SimWorker(
            id=self._next_id,
            state=WARM if warm else STARTING,
            since=t,
            loaded_at=t + self.model.startup_time_s,
            spot=spot,
        )
        self.workers[worker.id] = worker
        self.by_state[worker.state].add(worker.id)
        self.any_spot = self.any_spot or spot
        self._next_id += 1
        return worker.id

    def promote(self, worker_id: int, t: float) -> None:
        worker = self.workers[worker_id]
        self._set(worker, READY if t >= worker.loaded_at else STARTING, t)
        worker.streams = 0.0

    def drain(self, worker_id: int, t: float, service_s: float) -> None:
        worker, ready = self.workers[worker_id], self.ready()
        worker.streams = self.serving_streams(t) / ready if ready else 0.0
        self._set(worker, DRAINING, t)
        worker.drain_until = t + service_s

    def keep_warm(self, worker_id: int, t: float) -> None:
        self._set(self.workers[worker_id], WARM, t)

    def stop(self, worker_id: int, t: float) -> None:
        self._set(self.workers[worker_id], DEAD, t)


def _weighted_quantile(values: list[tuple[float, float]], q: float) -> float | None:
    total = sum(count for _, count in values)
    if total <= 0:
        return None
    running = 0.0
    for value, count in sorted(values):
        running += count
        if running >= q * total:
            return value
    return values[-1][0]
