"""Keep each worker's batch full but not overfull, and queue the rest.

vLLM batches continuously, so the gateway's job is to hold each worker near its target
in-flight count (the deployment's max_in_flight_per_worker, shared among
GATEWAY_PROCESSES) and make everything else wait in a per-deployment queue, interactive
requests ahead of batch ones. Which free worker a request gets is the router's choice:
the deployment's routing policy (scaling/routing/policies.py) for a request that brings
its RouteContext, otherwise `pick` (least loaded); this module decides when.

Within a priority, requests wait in one lane per tenant (scaling/routing/fair_queue.py):
a freed slot goes to the tenant holding the fewest slots of the deployment per unit of
weight, ties by weighted virtual time. A tenant that floods the queue gets its weighted
share of the slots and no more, so the others' requests do not wait behind its backlog.
A tenant may also have a concurrency cap: while it holds that many slots its queued
requests are skipped and others are served. Like the slots, the cap is shared among
GATEWAY_PROCESSES (each process allows ceil(cap / processes)): counting it across
processes would need a Redis round trip per grant and release, and leases that survive a
crashed process; the share errs by at most processes - 1 requests.

Slots are held for a whole generation and never taken back, so a tenant below its share
would still wait for the next release (the mean service time / slots, about 1 / the
deployment's throughput) while a flooder holds every slot: at 29 requests/s that wait
alone raised the other team's P99 TTFT by 40% in `manage.py bench_fairness`. So such a
request borrows: it may start on a slot past a worker's share, one per
SLOTS_PER_BORROWED_SLOT (a worker with 32 slots of this process lends 2, one with fewer
than 16 none), and the releases that follow start nobody until the worker is back under
its share. A worker then runs at most 1/16 above its target, briefly.

FAIR_QUEUEING=0 puts every request in one lane (first come first served within a
priority, no caps), which is how the benchmark measures what fairness buys.

Batch lines (Priority.BATCH) are placed by their own bound, not by the process's share:
each goes only to a worker with batch room of its own (scaling/routing/batch_meter.py's
WorkerAllowance: the worker's scraped spare below its target, plus the lines of ours that
scrape counted, less ours on it now), chosen by the deployment's policy made for batch
(policies.for_batch: spot workers first). The room comes from the fleet-wide scrape, so
it is not divided by GATEWAY_PROCESSES: the batch runner is one process beside the
gateways, and with the share it could fill only 1/GATEWAY_PROCESSES of each worker.

The queue lengths are published to Redis (scaling/routing/queue_depth.py) by the gateway's
own dispatcher, the one on the shared fleet view, and by any given a QueuePublisher: the
autoscaler scales on them, since a worker's own waiting count stays near zero behind us.
"""

import asyncio
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Literal

from django.conf import settings

from inference.snapshot import FleetView, WorkerView, fleet_view
from scaling.routing.batch_meter import OwnLine, WorkerAllowance
from scaling.routing.cold_start import cold_start
from scaling.routing.fair_queue import ANONYMOUS, FairQueue, Tenant
from scaling.routing.policies import for_batch, router_for
from scaling.routing.queue_depth import QueuePublisher
from scaling.routing.router import Load, RouteContext, Router

# A request of a tenant below another's share of the slots, with every slot taken, may
# start on a slot past a worker's share, one per this many slots of the share, instead of
# waiting for the next release; the next release pays it back. See the module docstring.
SLOTS_PER_BORROWED_SLOT = 16
# A batch line that brings no RouteContext (an embeddings line) is placed by this policy.
BATCH_DEFAULT_POLICY = "least_loaded"


class Priority(IntEnum):
    INTERACTIVE = 0
    BATCH = 1


class NoHealthyWorker(Exception):
    """The deployment has no routable worker at all (HTTP 503)."""


class QueueTimeout(Exception):
    """No slot for QUEUE_TIMEOUT_S: every worker stayed full, or the tenant stayed at its
    concurrency cap (HTTP 503, retry later)."""


class NoReplicaInTime(QueueTimeout):
    """A deployment that scales from zero had no routable worker within
    SCALE_FROM_ZERO_TIMEOUT_S of the request (HTTP 503, retry later)."""


@dataclass(frozen=True)
class Lease:
    worker: WorkerView
    tenant: Tenant | None = None  # counted against its concurrency cap until released
    batch_line: OwnLine | None = None  # a batch line's grant, in the batch allowance


Picker = Callable[[Sequence[WorkerView], dict[str, int]], WorkerView]


def least_in_flight(candidates: Sequence[WorkerView], in_flight: dict[str, int]) -> WorkerView:
    """Default pick: fewest requests, counting ours and what the worker reports waiting."""
    return min(candidates, key=lambda w: (in_flight.get(w.url, 0) + w.waiting, w.kv_usage))


@dataclass(eq=False)
class _Waiter:
    future: "asyncio.Future[Lease]"
    exclude: frozenset[str]
    route: RouteContext | None = None
    priority: Priority = Priority.INTERACTIVE
    tenant: Tenant | None = None

    @property
    def tenant_key(self) -> str:
        return (self.tenant or ANONYMOUS).key


@dataclass
class _Queue:
    """One deployment's waiters: strict priority, fair across tenants within a priority."""

    by_priority: dict[Priority, FairQueue[_Waiter]] = field(
        default_factory=lambda: {p: FairQueue() for p in Priority}
    )
    held: dict[str, int] = field(default_factory=dict)  # slots held here, per tenant key
    # It scales from zero (scaling/routing/cold_start.py): with no routable worker at all,
    # its waiters wait for one to come instead of failing at once.
    waits_for_replica: bool = False

    def __len__(self) -> int:
        return sum(len(q) for q in self.by_priority.values())

    def add(self, waiter: _Waiter) -> None:
        tenant = waiter.tenant
        lane = tenant if settings.FAIR_QUEUEING and tenant is not None else ANONYMOUS
        self.by_priority[waiter.priority].append(waiter, lane)

    def next(
        self, may_start: Callable[[Tenant], bool], skip: Collection[_Waiter] = ()
    ) -> _Waiter | None:
        """The waiter to serve next: the highest priority with one whose tenant may start
        (skip: waiters that cannot be served now; each keeps its place)."""
        for queue in self.by_priority.values():
            if (waiter := queue.next(may_start, self._holds, skip)) is not None:
                return waiter
        return None

    def _holds(self, tenant_key: str) -> int:
        return self.held.get(tenant_key, 0)

    def take(self, waiter: _Waiter) -> None:
        """`waiter` got a slot: it leaves the queue and its tenant holds one more."""
        self.by_priority[waiter.priority].take(waiter)
        _add(self.held, waiter.tenant_key, 1)

    def remove(self, waiter: _Waiter) -> None:
        self.by_priority[waiter.priority].remove(waiter)

    def may_borrow(self, waiter: _Waiter) -> bool:
        """Whether `waiter` may take a slot beyond a worker's share: its tenant holds fewer
        slots per weight than another tenant with requests waiting here (a flooder)."""
        tenant = waiter.tenant
        if not settings.FAIR_QUEUEING or tenant is None:
            return False
        return any(q.holds_more_than(tenant, self._holds) for q in self.by_priority.values())


class Dispatcher:
    def __init__(
        self,
        fleet: FleetView = fleet_view,
        pick: Picker = least_in_flight,
        routers: Callable[[str], Router] = router_for,
        publisher: QueuePublisher | Literal["auto"] | None = "auto",
    ) -> None:
        """publisher: where the queue lengths go; "auto": a QueuePublisher for the
        gateway's dispatcher (on the shared fleet_view), none for others (tests, benches)."""
        self.fleet = fleet
        self.pick = pick
        self.routers = routers
        if publisher == "auto":
            publisher = QueuePublisher() if fleet is fleet_view else None
        self.publisher = publisher
        # Which deployments scale from zero; only the gateway's dispatcher asks the database.
        self.cold_start = cold_start if fleet is fleet_view else None
        self.in_flight: dict[str, int] = {}
        self.tenant_in_flight: dict[str, int] = {}  # leases held per tenant key, any deployment
        self.queues: dict[str, _Queue] = {}
        self.batch_allowance = WorkerAllowance()  # batch lines per worker, and their room
        self.batch_routers: dict[str, Router] = {}  # per policy, made for batch lines

    def queue_length(self, deployment: str) -> int:
        return len(self.queues.get(deployment, ()))

    def queue_lengths(self) -> dict[str, int]:
        return {name: len(queue) for name, queue in self.queues.items()}

    def slots_per_worker(self, worker: WorkerView) -> int:
        return max(1, math.ceil(worker.max_in_flight / settings.GATEWAY_PROCESSES))

    def tenant_share(self, tenant: Tenant) -> int | None:
        """This process's share of the tenant's concurrency cap; None: uncapped."""
        if tenant.max_concurrent is None:
            return None
        return max(1, math.ceil(tenant.max_concurrent / settings.GATEWAY_PROCESSES))

    def may_start(self, tenant: Tenant) -> bool:
        share = self.tenant_share(tenant)
        return share is None or self.tenant_in_flight.get(tenant.key, 0) < share

    async def acquire(
        self,
        deployment: str,
        priority: Priority = Priority.INTERACTIVE,
        exclude: frozenset[str] = frozenset(),
        timeout_s: float | None = None,
        route: RouteContext | None = None,
        tenant: Tenant | None = None,
        on_hold: Callable[[str], None] | None = None,
    ) -> Lease:
        """A slot on a worker of `deployment`, chosen by route.policy when route is given.

        tenant: whose request it is, for fair queueing and its concurrency cap; requests
        without one share one lane. on_hold: told (with the deployment's name) when the
        request is held for a replica of a deployment scaled to zero, before it waits."""
        if route is not None and route.deployment != deployment:
            raise ValueError(f"route is for {route.deployment!r}, not {deployment!r}")
        loop = asyncio.get_running_loop()
        queue = self.queues.get(deployment)
        if queue is None:  # not setdefault: a _Queue per request is 2% of a request's CPU
            queue = self.queues[deployment] = _Queue()
        # Read before the waiter joins the queue: a caller gone during these awaits (or a
        # failed read) must leave no waiter behind for a release to grant a slot to.
        routable = await self.fleet.routable(deployment)
        cold = not routable and await self._waits_for_replica(deployment)
        # With a worker routable, nothing to hold for. Without one, requests already held
        # for a replica keep the queue waiting, whatever this request found (a snapshot gone
        # stale makes it no cold start, and it failed every request queued with it).
        queue.waits_for_replica = not routable and (
            cold or (queue.waits_for_replica and len(queue) > 0)
        )
        if cold and on_hold is not None:
            on_hold(deployment)
        waiter = _Waiter(loop.create_future(), exclude, route, priority, tenant)
        queue.add(waiter)
        timeout = settings.SCALE_FROM_ZERO_TIMEOUT_S if cold else settings.QUEUE_TIMEOUT_S
        deadline = loop.time() + (timeout_s or timeout)
        handed_over = False
        try:
            self._serve(queue, routable)
            if self.publisher is not None and not waiter.future.done():
                self.publisher.wake(self.queue_lengths)  # it waits: the queue is news
            while True:
                try:
                    # Re-check at least every 0.5 s: workers join and recover without a release.
                    wait = max(min(deadline - loop.time(), 0.5), 0)
                    lease = await asyncio.wait_for(asyncio.shield(waiter.future), wait)
                    handed_over = True
                    return lease
                except TimeoutError:
                    if loop.time() >= deadline and cold:
                        raise NoReplicaInTime(
                            f"no worker of {deployment!r} was ready within "
                            f"{settings.SCALE_FROM_ZERO_TIMEOUT_S:.0f} s (it scales from "
                            "zero: one is being woken or started)"
                        ) from None
                    if loop.time() >= deadline:
                        raise QueueTimeout(self._why_waiting(deployment, tenant)) from None
                    self._serve(queue, await self.fleet.routable(deployment))
        finally:
            if not waiter.future.done():
                queue.remove(waiter)  # granted waiters were already popped from the queue
            if not handed_over:
                self._discard(waiter)

    async def _waits_for_replica(self, deployment: str) -> bool:
        """Whether a request finding no routable worker should wait for one: the deployment
        scales from zero, and the snapshot is current (a paused scraper makes every worker
        unroutable; that is no cold start, and such requests fail at once as before)."""
        if self.cold_start is None or self.fleet.stale(deployment):
            return False
        return await self.cold_start.waits_for_replica(deployment)

    def _discard(self, waiter: _Waiter) -> None:
        """A slot granted just as its caller timed out or was cancelled goes back."""
        future = waiter.future
        if not future.done():
            future.cancel()
        elif not future.cancelled() and future.exception() is None:
            self.release(future.result())

    def _why_waiting(self, deployment: str, tenant: Tenant | None) -> str:
        if tenant is not None and settings.FAIR_QUEUEING and not self.may_start(tenant):
            return f"the team stayed at its limit of {tenant.max_concurrent} concurrent requests"
        return f"all workers for {deployment!r} stayed full"

    def _serve(self, queue: _Queue, routable: Sequence[WorkerView]) -> None:
        """Grant free slots to waiters in fair order; fail them all if nothing can serve."""
        skipped: set[_Waiter] = set()
        while (waiter := queue.next(self.may_start, skipped)) is not None:
            candidates = [w for w in routable if w.url not in waiter.exclude]
            if not routable and queue.waits_for_replica:
                return  # scaled to zero: the published queue brings a replica; wait for it
            if not candidates:
                queue.remove(waiter)
                if not waiter.future.done():
                    waiter.future.set_exception(NoHealthyWorker("no healthy worker available"))
                continue
            if waiter.priority is Priority.BATCH:
                worker = self._choose_for_batch(waiter, candidates)
                if worker is None:
                    return  # no worker has batch room: wait for a release or a re-check
                batch_line: OwnLine | None = self.batch_allowance.granted(worker)
            else:
                worker = self._choose(waiter, candidates)
                if worker is None and queue.may_borrow(waiter):
                    worker = self._choose(waiter, candidates, borrowing=True)
                if worker is None and self._only_excluded_have_room(waiter, routable):
                    # A retry that may not go back to the worker it failed on must not keep
                    # the requests behind it from that worker's free slot: it keeps its
                    # place, and the next waiter in fair order is tried.
                    skipped.add(waiter)
                    continue
                if worker is None:
                    return  # every worker is full: wait for a release or the next re-check
                batch_line = None
            self.in_flight[worker.url] = self.in_flight.get(worker.url, 0) + 1
            if waiter.tenant is not None:
                _add(self.tenant_in_flight, waiter.tenant.key, 1)
            queue.take(waiter)
            waiter.future.set_result(Lease(worker, waiter.tenant, batch_line))

    def _only_excluded_have_room(self, waiter: _Waiter, routable: Sequence[WorkerView]) -> bool:
        """A worker this waiter may not use has a free slot (a pure check: no router is
        asked, so no round-robin turn or session is spent on it)."""
        return any(
            w.url in waiter.exclude and self.in_flight.get(w.url, 0) < self.slots_per_worker(w)
            for w in routable
        )

    def _choose(
        self, waiter: _Waiter, candidates: list[WorkerView], borrowing: bool = False
    ) -> WorkerView | None:
        """A worker with a free slot (borrowing: counting the slots it may lend too)."""

        def slots(worker: WorkerView) -> int:
            share = self.slots_per_worker(worker)
            return share + share // SLOTS_PER_BORROWED_SLOT if borrowing else share

        if waiter.route is None:
            free = [w for w in candidates if self.in_flight.get(w.url, 0) < slots(w)]
            return self.pick(free, self.in_flight) if free else None
        load = Load(self.in_flight, slots)
        return self.routers(waiter.route.policy).route(candidates, waiter.route, load)

    def _choose_for_batch(self, waiter: _Waiter, candidates: list[WorkerView]) -> WorkerView | None:
        """A worker with batch room of its own, by the deployment's policy made for batch
        lines (a line without a RouteContext: least loaded). Not the process's share of a
        worker's slots: the room, from the fleet-wide scrape, is the bound."""
        route = waiter.route or RouteContext(candidates[0].deployment, BATCH_DEFAULT_POLICY)
        router = self.batch_routers.get(route.policy)
        if router is None:
            router = for_batch(self.routers(route.policy), self.batch_allowance)
            self.batch_routers[route.policy] = router
        return router.route(candidates, route, Load(self.in_flight, _whole_worker))

    def release(self, lease: Lease) -> None:
        url, deployment = lease.worker.url, lease.worker.deployment
        _add(self.in_flight, url, -1)  # no entry per worker ever served: pods come and go
        if lease.batch_line is not None:
            self.batch_allowance.released(lease.worker, lease.batch_line)
        if (own := self.queues.get(deployment)) is not None:
            _add(own.held, (lease.tenant or ANONYMOUS).key, -1)
        to_serve = [deployment]
        if lease.tenant is not None:
            _add(self.tenant_in_flight, lease.tenant.key, -1)
            if lease.tenant.max_concurrent is not None:
                # Under its cap again: its requests queued for other deployments may start.
                to_serve += [name for name in self.queues if name != deployment]
        for name in to_serve:
            if (queue := self.queues.get(name)) is not None:
                self._serve(queue, self.fleet.cached_routable(name))


def _whole_worker(worker: WorkerView) -> int:
    """A batch line's slots on a worker: all of them (its room is the bound that counts)."""
    return worker.max_in_flight


def _add(counts: dict[str, int], key: str, change: int) -> None:
    """Count per key, keeping no entry at zero (none per team that ever sent a request,
    nor per worker that ever served one)."""
    if (total := counts.get(key, 0) + change) > 0:
        counts[key] = total
    else:
        counts.pop(key, None)
