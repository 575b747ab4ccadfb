"""How many batch lines may be in flight on a deployment now: the fleet's spare capacity.

Batch lines are dispatched at batch priority, behind every interactive request, but
priority alone acts only inside one process's queue: the gateways' interactive requests
and a batch runner's lines meet on the workers. So the runner asks this meter before it
starts a line. Spare capacity is, over the deployment's routable workers, what each may
hold (max_in_flight less BATCH_HEADROOM of it, kept for interactive bursts) less what it
reports running and waiting, from the fleet snapshot. When interactive traffic rises, the
spare turns negative and the runner starts nothing until its lines drain.

The snapshot is a scrape old, and the runner's own lines are in it as they were then: a
line counted running at the scrape is the runner's, not interactive load, so it is added
back to the spare, whether it is still in flight or has finished since (a line lasting
less than a scrape interval would otherwise hold its slot until the next scrape, and the
fleet would fill to the spare of one scrape per interval). Lines started after the scrape
are not in its counts and are not added back (else each refresh would count the runner's
newest lines as free capacity a second time).
"""

import math
import time
from collections.abc import Sequence

from django.conf import settings

from inference.snapshot import FleetView, WorkerView, fleet_view

IN_PROCESS_CONCURRENCY = 2  # a model the gateway runs itself (the built-in embedder)


def spare_slots(workers: Sequence[WorkerView], headroom: float) -> int:
    """Slots free for batch work across `workers`; negative when they are over target."""
    spare = 0.0
    for worker in workers:
        target = math.floor(worker.max_in_flight * (1 - headroom))
        spare += target - worker.running - worker.waiting
    return math.floor(spare)


class BatchMeter:
    """One per runner: its lines in flight per deployment, and when each started."""

    def __init__(self, fleet: FleetView = fleet_view) -> None:
        self.fleet = fleet
        self.started: dict[str, list[float]] = {}  # start times of lines in flight
        # (started, finished) of lines that ended since the oldest scrape still relevant.
        self.ended: dict[str, list[tuple[float, float]]] = {}

    def in_flight(self, deployment: str) -> int:
        return len(self.started.get(deployment, ()))

    async def may_start(self, deployment: str, in_process: bool = False) -> bool:
        mine = self.started.get(deployment, [])
        ceiling = settings.BATCH_MAX_CONCURRENCY
        if in_process:
            return len(mine) < min(IN_PROCESS_CONCURRENCY, ceiling)
        workers = await self.fleet.routable(deployment)
        if not workers:
            return False
        scraped = min(w.scraped_at for w in workers)
        ended = self.ended.get(deployment, [])
        ended[:] = [(s, f) for s, f in ended if f > scraped]  # older ones: out of the counts
        counted = sum(1 for started in mine if started < scraped)
        counted += sum(1 for started, _ in ended if started < scraped)
        allowed = counted + spare_slots(workers, settings.BATCH_HEADROOM)
        return len(mine) < min(allowed, ceiling)

    def started_line(self, deployment: str) -> float:
        at = time.time()
        self.started.setdefault(deployment, []).append(at)
        return at

    def finished_line(self, deployment: str, started_at: float) -> None:
        self.started[deployment].remove(started_at)
        self.ended.setdefault(deployment, []).append((started_at, time.time()))
