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
fleet would fill to the spare of one scrape per interval). Lines the scrape may not have
seen are not added back (else the newest lines would count as free capacity a second
time). A scrape takes time, so a worker's view carries two: `asked_at`, when the scrape
began asking (a line the worker held before it is in the reading), and `scraped_at`, when
the reading was in (a line that ended here before it is not). `OwnLines` keeps that
account, per deployment for the meter and per worker for the allowance. They differ in
when a line is held:

- the allowance's, from the worker's first answer on it (the dispatcher is told of a
  streamed line's first chunk): a line granted just before a scrape may not have reached the
  worker yet (a loaded gateway). Counted from its grant and against one scrape time
  stamped after the reading, a worker took two lines more than its spare in a CI run.
  Until its first answer a line counts against the room twice, once as ours and once in
  the worker's own counts: conservative, for as long as it waits in the worker's queue
  and prefills. An embeddings line, and a chat line asked whole (every one without
  logprobs or prompt_logprobs), has no first chunk before its whole answer: it is taken
  as held from the moment the request is about to be sent (gateway/serving/embeddings.py,
  scaling/routing/streaming.py), else each would count twice for its whole life and the
  lines would fill half the room; and as not held again if its worker refused it or
  failed. That moment is before the request is written: a runner whose loop lags may
  reach the worker after a scrape that began asking in between, and that scrape's slot
  for it is offered once more until the next (the risk counting from the grant had; a
  runner dispatches only its own lines, so its loop lags far less than a gateway's);
- the meter's, from its start: the runner does not see a line's first chunk, and the
  meter only lets lines queue; where each may run is the allowance's to say.

A worker ends a line before its end reaches us: it drops the request from its running
count, then sends the last chunk, which this process reads when its loop gets to it. A
reading taken in between does not hold the line, though it ended here after the reading
was in. Counted as ours, its slot would be offered twice until the next scrape, and lines
that started together end together: a CI run put 3 lines on a worker whose spare was 3
while 3 others had just ended that way, and it ran 12 of its 10 slots. So an ended line
is added back only if its end reached us at least END_LAG_S after the reading was in;
one that ended sooner after it holds its slot until the next scrape. A line still in
flight here that the worker has already ended is counted too, but it also counts as ours
on the worker, so the extra slot offered for it is that line's own: the worker does not
run more than its spare.

A deployment scaled to zero has no spare to meter: its replicas come only for a published
queue (scaling/routing/cold_start.py). So while a runner finds no routable worker of a
deployment that scales from zero, its meter publishes one waiting request for it (the
autoscaler's `from_zero` signal) and withdraws it once a worker is routable; from then on
the lines use the spare like any other. One, not the lines left: a batch wakes a replica,
it does not size the fleet (interactive load does).
"""

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from inference.snapshot import FleetView, WorkerView, fleet_view
from scaling.routing.cold_start import ColdStartDeployments, cold_start
from scaling.routing.queue_depth import PUBLISH_INTERVAL_S, QueuePublisher

logger = logging.getLogger(__name__)
IN_PROCESS_CONCURRENCY = 2  # a model the gateway runs itself (the built-in embedder)
# How late a stream's end may reach this process after the worker ended it (a busy loop,
# the last chunks in flight), for a reading taken in between (see the module docstring).
# Larger is safer but idles more slots for a scrape: 0.1 s cost 5 points of fill in
# `manage.py bench_batch` (docs/benchmarks.md, "Batch lines on idle capacity").
END_LAG_S = 0.05


def worker_spare(worker: WorkerView, headroom: float) -> float:
    """Slots free for batch work on one worker, as scraped; negative when over target."""
    target = math.floor(worker.max_in_flight * (1 - headroom))
    return target - worker.running - worker.waiting


def spare_slots(workers: Sequence[WorkerView], headroom: float) -> int:
    """Slots free for batch work across `workers`; negative when they are over target (a
    worker over its target offsets the others' spare: the meter stays conservative)."""
    return math.floor(sum(worker_spare(worker, headroom) for worker in workers))


@dataclass(eq=False)
class OwnLine:
    """One batch line: granted at `started_at`; from `seen_from` a scrape can count it."""

    started_at: float
    seen_from: float | None = None
    ended_at: float | None = None

    def answered(self) -> None:
        """The worker holds the line from now on: its first chunk came, or (a line asked
        whole, an embeddings line) it is being sent."""
        if self.seen_from is None:
            self.seen_from = time.time()

    def not_held(self) -> None:
        """Its worker refused it or failed: taken as held when sent (a line asked whole),
        it must not count, once ended, as a line a scrape saw (its slot offered again)."""
        self.seen_from = None


class OwnLines:
    """Batch lines sent somewhere (a deployment, a worker): those in flight, and those that
    ended since the last scrape that could have counted them."""

    def __init__(self) -> None:
        self.in_flight: list[OwnLine] = []
        self.ended: list[OwnLine] = []

    def __len__(self) -> int:
        return len(self.in_flight)

    def start(self, seen_from_start: bool) -> OwnLine:
        at = time.time()
        line = OwnLine(at, at if seen_from_start else None)
        self.in_flight.append(line)
        return line

    def finish(self, line: OwnLine) -> None:
        self.in_flight.remove(line)
        line.ended_at = time.time()
        if line.seen_from is not None:  # never seen: no scrape counted it
            self.ended.append(line)

    @property
    def idle(self) -> bool:
        return not self.in_flight and not self.ended

    def ended_before(self, moment: float) -> bool:
        """Nothing in flight, and every line kept ended before `moment`."""
        return not self.in_flight and all((line.ended_at or 0.0) < moment for line in self.ended)

    def counted(self, asked_at: float, scraped_at: float) -> int:
        """How many of these lines a scrape saw running: those seen before it began asking
        (`asked_at`), in flight, or ended here at least END_LAG_S after its reading was in
        (`scraped_at`). Ended ones older than the reading are forgotten."""
        self.ended[:] = [line for line in self.ended if (line.ended_at or 0.0) > scraped_at]
        surely_read = [
            line for line in self.ended if (line.ended_at or 0.0) > scraped_at + END_LAG_S
        ]
        return sum(
            1
            for line in (*self.in_flight, *surely_read)
            if line.seen_from is not None and line.seen_from < asked_at
        )


class BatchMeter:
    """One per runner: its lines in flight per deployment, and when each started; and the
    deployments scaled to zero it asks a replica of (see the module docstring)."""

    def __init__(
        self,
        fleet: FleetView = fleet_view,
        scales_from_zero: ColdStartDeployments = cold_start,
        publisher: QueuePublisher | None = None,
    ) -> None:
        self.fleet = fleet
        self.lines: dict[str, OwnLines] = {}
        self.scales_from_zero = scales_from_zero
        self.publisher = publisher or QueuePublisher()
        self.asking: set[str] = set()  # deployments whose waiting line is published
        self._asked_at = float("-inf")

    def in_flight(self, deployment: str) -> int:
        return len(self.lines.get(deployment, ()))

    async def may_start(self, deployment: str, in_process: bool = False) -> bool:
        mine = self.lines.setdefault(deployment, OwnLines())
        ceiling = settings.BATCH_MAX_CONCURRENCY
        if in_process:
            return len(mine) < min(IN_PROCESS_CONCURRENCY, ceiling)
        workers = await self.fleet.routable(deployment)
        if not workers:
            await self._ask_for_replica(deployment)
            return False
        if deployment in self.asking:
            self.asking.discard(deployment)
            await self._publish()
        counted = mine.counted(
            min(w.reading_from for w in workers), min(w.scraped_at for w in workers)
        )
        allowed = counted + spare_slots(workers, settings.BATCH_HEADROOM)
        return len(mine) < min(allowed, ceiling)

    def started_line(self, deployment: str) -> OwnLine:
        return self.lines.setdefault(deployment, OwnLines()).start(seen_from_start=True)

    async def close(self) -> None:
        """Withdraw what is published (the runner's end): a dead runner's fields go stale
        within seconds instead."""
        if self.asking:
            self.asking.clear()
            await self._publish()

    async def _ask_for_replica(self, deployment: str) -> None:
        """Publish a waiting line for a deployment that scales from zero, again at most every
        PUBLISH_INTERVAL_S (the runner asks every 0.2 s; a field is fresh for 5 s). A stale
        snapshot (a paused scraper) says nothing about replicas: nothing is asked then."""
        if self.fleet.stale(deployment):
            return
        if not await self.scales_from_zero.waits_for_replica(deployment):
            return
        new = deployment not in self.asking
        if new:
            self.asking.add(deployment)
            logger.info("batch lines wait for a replica of %r (it scales from zero)", deployment)
        if new or time.monotonic() - self._asked_at >= PUBLISH_INTERVAL_S:
            await self._publish()

    async def _publish(self) -> None:
        self._asked_at = time.monotonic()
        await self.publisher.publish(dict.fromkeys(self.asking, 1))

    def finished_line(self, deployment: str, line: OwnLine) -> None:
        self.lines[deployment].finish(line)


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
        counted = lines.counted(worker.reading_from, worker.scraped_at)
        if lines.idle:  # nothing in flight, nothing a scrape could count: no entry kept
            del self.lines[worker.url]
        return math.floor(counted + worker_spare(worker, headroom)) - len(lines)

    def granted(self, worker: WorkerView) -> OwnLine:
        """A batch line got a slot on `worker`: tell it `answered()` once the worker holds
        it (OwnLine.answered), and pass it to `released`."""
        lines = self.lines.get(worker.url)
        if lines is None:
            self._forget_gone_workers()
            lines = self.lines[worker.url] = OwnLines()
        return lines.start(seen_from_start=False)

    def released(self, worker: WorkerView, line: OwnLine) -> None:
        self.lines[worker.url].finish(line)

    def _forget_gone_workers(self) -> None:
        """Drop the entries of workers with nothing in flight whose last line ended longer
        ago than a snapshot stays fresh: no view `room` is asked about can count it. A
        worker gone from the fleet is never asked about again (pods come and go), so its
        entry would stay; this runs when a worker with no entry is granted a line (after
        each idle spell, not per line)."""
        before = time.time() - settings.FLEET_STALE_AFTER_S
        for url in [url for url, lines in self.lines.items() if lines.ended_before(before)]:
            del self.lines[url]
