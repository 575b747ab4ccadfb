"""How many batch lines may be in flight now: on a deployment, and on each of its workers.

Batch lines are dispatched at batch priority, behind every interactive request, but
priority alone acts only inside one process's queue: the gateways' interactive requests
and a batch runner's lines meet on the workers. So capacity for batch work is read from
the fleet snapshot: each worker may hold max_in_flight less BATCH_HEADROOM of it (kept for
interactive bursts), less what it reports running and waiting. Two bounds use it:

- `BatchMeter`, the runner's: how many lines it may have in flight on a deployment (the
  spare summed over the deployment's routable workers). When interactive traffic rises
  the spare turns negative and the runner starts nothing until its lines drain.
- `WorkerAllowance`, the dispatcher's: where a line may go. A line goes only to a worker
  with spare of its own (the `HasBatchRoom` filter), so the lines the deployment's spare
  allows are never piled onto one worker while another has room (they were, in a third
  of the samples of `manage.py bench_batch`, before this bound).

The snapshot is a scrape old, and the batch lines in flight are in it as they were then:
a line counted running at the scrape is batch work, not interactive load, so it is added
back to the spare, whether it is still in flight or has finished since (a line lasting
less than a scrape interval would otherwise hold its slot until the next scrape, and the
fleet would fill to the spare of one scrape per interval). Lines started after the scrape
are not in its counts and are not added back (else each refresh would count the newest
lines as free capacity a second time). `OwnLines` keeps that account, per deployment for
the meter and per worker for the allowance.
"""

import math
import time
from collections.abc import Sequence

from django.conf import settings

from inference.snapshot import FleetView, WorkerView, fleet_view

IN_PROCESS_CONCURRENCY = 2  # a model the gateway runs itself (the built-in embedder)


def worker_spare(worker: WorkerView, headroom: float) -> float:
    """Slots free for batch work on one worker, as scraped; negative when over target."""
    target = math.floor(worker.max_in_flight * (1 - headroom))
    return target - worker.running - worker.waiting


def spare_slots(workers: Sequence[WorkerView], headroom: float) -> int:
    """Slots free for batch work across `workers`; negative when they are over target (a
    worker over its target offsets the others' spare: the meter stays conservative)."""
    return math.floor(sum(worker_spare(worker, headroom) for worker in workers))


class OwnLines:
    """Batch lines sent somewhere (a deployment, a worker): when each in flight started,
    and (started, finished) of those that ended since the last scrape that counted them."""

    def __init__(self) -> None:
        self.started: list[float] = []
        self.ended: list[tuple[float, float]] = []

    def __len__(self) -> int:
        return len(self.started)

    def start(self) -> float:
        at = time.time()
        self.started.append(at)
        return at

    def finish(self, started_at: float) -> None:
        self.started.remove(started_at)
        self.ended.append((started_at, time.time()))

    def counted(self, scraped_at: float) -> int:
        """How many of these lines a scrape at `scraped_at` saw running: those started
        before it, in flight or ended after it. Ended ones older than it are forgotten."""
        self.ended[:] = [(s, f) for s, f in self.ended if f > scraped_at]
        seen = sum(1 for started in self.started if started < scraped_at)
        return seen + sum(1 for started, _ in self.ended if started < scraped_at)


class BatchMeter:
    """One per runner: its lines in flight per deployment, and when each started."""

    def __init__(self, fleet: FleetView = fleet_view) -> None:
        self.fleet = fleet
        self.lines: dict[str, OwnLines] = {}

    def in_flight(self, deployment: str) -> int:
        return len(self.lines.get(deployment, ()))

    async def may_start(self, deployment: str, in_process: bool = False) -> bool:
        mine = self.lines.setdefault(deployment, OwnLines())
        ceiling = settings.BATCH_MAX_CONCURRENCY
        if in_process:
            return len(mine) < min(IN_PROCESS_CONCURRENCY, ceiling)
        workers = await self.fleet.routable(deployment)
        if not workers:
            return False
        counted = mine.counted(min(w.scraped_at for w in workers))
        allowed = counted + spare_slots(workers, settings.BATCH_HEADROOM)
        return len(mine) < min(allowed, ceiling)

    def started_line(self, deployment: str) -> float:
        return self.lines.setdefault(deployment, OwnLines()).start()

    def finished_line(self, deployment: str, started_at: float) -> None:
        self.lines[deployment].finish(started_at)


class WorkerAllowance:
    """One per dispatcher: its batch lines on each worker, and how many more each may take.

    A worker's room is its own spare (worker_spare) plus the lines of ours its last scrape
    counted, less the lines of ours on it now. The dispatcher records every batch grant and
    release here; interactive requests are not recorded (they reach the room through the
    scrape): batch lines run in the batch runner's process, which dispatches nothing else.
    """

    def __init__(self) -> None:
        self.lines: dict[str, OwnLines] = {}  # by worker URL

    def held(self, worker: WorkerView) -> int:
        return len(self.lines.get(worker.url, ()))

    def room(self, worker: WorkerView, headroom: float | None = None) -> int:
        """More batch lines `worker` may take now; zero or less: none."""
        if headroom is None:
            headroom = settings.BATCH_HEADROOM
        lines = self.lines.get(worker.url)
        if lines is None:
            return math.floor(worker_spare(worker, headroom))
        counted = lines.counted(worker.scraped_at)
        return math.floor(counted + worker_spare(worker, headroom)) - len(lines)

    def granted(self, worker: WorkerView) -> float:
        """A batch line got a slot on `worker`; returns its start, for `released`."""
        return self.lines.setdefault(worker.url, OwnLines()).start()

    def released(self, worker: WorkerView, started_at: float) -> None:
        self.lines[worker.url].finish(started_at)
