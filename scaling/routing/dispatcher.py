"""Keep each worker's batch full but not overfull, and queue the rest.

vLLM batches continuously, so the gateway's job is to hold each worker near its target
in-flight count (the deployment's max_in_flight_per_worker, shared among
GATEWAY_PROCESSES) and make everything else wait in a per-deployment queue, interactive
requests ahead of batch ones, first come first served within a priority. Which free
worker a request gets is the router's choice: the deployment's routing policy
(scaling/routing/policies.py) for a request that brings its RouteContext, otherwise
`pick` (least loaded); this module decides when.
"""

import asyncio
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from django.conf import settings

from inference.snapshot import FleetView, WorkerView, fleet_view
from scaling.routing.policies import router_for
from scaling.routing.router import Load, RouteContext, Router


class Priority(IntEnum):
    INTERACTIVE = 0
    BATCH = 1


class NoHealthyWorker(Exception):
    """The deployment has no routable worker at all (HTTP 503)."""


class QueueTimeout(Exception):
    """Every worker stayed full for QUEUE_TIMEOUT_S (HTTP 503, retry later)."""


@dataclass(frozen=True)
class Lease:
    worker: WorkerView


Picker = Callable[[Sequence[WorkerView], dict[str, int]], WorkerView]


def least_in_flight(candidates: Sequence[WorkerView], in_flight: dict[str, int]) -> WorkerView:
    """Default pick: fewest requests, counting ours and what the worker reports waiting."""
    return min(candidates, key=lambda w: (in_flight.get(w.url, 0) + w.waiting, w.kv_usage))


@dataclass(eq=False)
class _Waiter:
    future: "asyncio.Future[Lease]"
    exclude: frozenset[str]
    route: RouteContext | None = None


@dataclass
class _Queue:
    by_priority: dict[Priority, deque[_Waiter]] = field(
        default_factory=lambda: {p: deque() for p in Priority}
    )

    def __len__(self) -> int:
        return sum(len(q) for q in self.by_priority.values())

    def head(self) -> _Waiter | None:
        return next((q[0] for q in self.by_priority.values() if q), None)

    def pop_head(self) -> None:
        next(q for q in self.by_priority.values() if q).popleft()

    def remove(self, waiter: _Waiter) -> None:
        for queue in self.by_priority.values():
            if waiter in queue:
                queue.remove(waiter)


class Dispatcher:
    def __init__(
        self,
        fleet: FleetView = fleet_view,
        pick: Picker = least_in_flight,
        routers: Callable[[str], Router] = router_for,
    ) -> None:
        self.fleet = fleet
        self.pick = pick
        self.routers = routers
        self.in_flight: dict[str, int] = {}
        self.queues: dict[str, _Queue] = {}

    def queue_length(self, deployment: str) -> int:
        return len(self.queues.get(deployment, ()))

    def slots_per_worker(self, worker: WorkerView) -> int:
        return max(1, math.ceil(worker.max_in_flight / settings.GATEWAY_PROCESSES))

    async def acquire(
        self,
        deployment: str,
        priority: Priority = Priority.INTERACTIVE,
        exclude: frozenset[str] = frozenset(),
        timeout_s: float | None = None,
        route: RouteContext | None = None,
    ) -> Lease:
        """A slot on a worker of `deployment`, chosen by route.policy when route is given."""
        if route is not None and route.deployment != deployment:
            raise ValueError(f"route is for {route.deployment!r}, not {deployment!r}")
        loop = asyncio.get_running_loop()
        queue = self.queues.setdefault(deployment, _Queue())
        waiter = _Waiter(loop.create_future(), exclude, route)
        queue.by_priority[priority].append(waiter)
        deadline = loop.time() + (timeout_s or settings.QUEUE_TIMEOUT_S)
        handed_over = False
        try:
            self._serve(queue, await self.fleet.routable(deployment))
            while True:
                try:
                    # Re-check at least every 0.5 s: workers join and recover without a release.
                    wait = max(min(deadline - loop.time(), 0.5), 0)
                    lease = await asyncio.wait_for(asyncio.shield(waiter.future), wait)
                    handed_over = True
                    return lease
                except TimeoutError:
                    if loop.time() >= deadline:
                        raise QueueTimeout(f"all workers for {deployment!r} stayed full") from None
                    self._serve(queue, await self.fleet.routable(deployment))
        finally:
            if not waiter.future.done():
                queue.remove(waiter)  # granted waiters were already popped from the queue
            if not handed_over:
                self._discard(waiter)

    def _discard(self, waiter: _Waiter) -> None:
        """A slot granted just as its caller timed out or was cancelled goes back."""
        future = waiter.future
        if not future.done():
            future.cancel()
        elif not future.cancelled() and future.exception() is None:
            self.release(future.result())

    def _serve(self, queue: _Queue, routable: Sequence[WorkerView]) -> None:
        """Grant free slots to waiters in order; fail them all if nothing can serve."""
        while (waiter := queue.head()) is not None:
            candidates = [w for w in routable if w.url not in waiter.exclude]
            if not candidates:
                queue.pop_head()
                if not waiter.future.done():
                    waiter.future.set_exception(NoHealthyWorker("no healthy worker available"))
                continue
            worker = self._choose(waiter, candidates)
            if worker is None:
                return  # every worker is full: wait for a release or the next re-check
            self.in_flight[worker.url] = self.in_flight.get(worker.url, 0) + 1
            queue.pop_head()
            waiter.future.set_result(Lease(worker))

    def _choose(self, waiter: _Waiter, candidates: list[WorkerView]) -> WorkerView | None:
        if waiter.route is None:
            free = [w for w in candidates if self._has_free_slot(w)]
            return self.pick(free, self.in_flight) if free else None
        load = Load(self.in_flight, self.slots_per_worker)
        return self.routers(waiter.route.policy).route(candidates, waiter.route, load)

    def _has_free_slot(self, worker: WorkerView) -> bool:
        return self.in_flight.get(worker.url, 0) < self.slots_per_worker(worker)

    def release(self, lease: Lease) -> None:
        url = lease.worker.url
        self.in_flight[url] = max(self.in_flight.get(url, 0) - 1, 0)
        queue = self.queues.get(lease.worker.deployment)
        if queue is not None:
            self._serve(queue, self.fleet.cached_routable(lease.worker.deployment))
