"""The faults of a chaos run, when they happen, and how each is done and undone.

Why a fixed schedule and one fault at a time: each fault gets a window of its own, so
every failed request can be put down to the fault that was on (or to none, which is a
violation), and the time to recover is measured from a known moment. The default schedule
spreads eight faults over the run (at fractions of its duration, each held as the issue
asks: a worker stopped for 20 s, the scraper for 15 s); `compressed` holds them for less,
for a run of a minute or two. A fault that is late (the one before it took longer) starts
as soon as that one is undone.

A window runs from the moment the fault is done to the moment it is undone: the process is
back and answering, the signal sent, the memory freed. What it did is in its notes (how
long Redis was down and how many keys it had before and after the replay, how long the
gateway took to drain, how much the cache Redis took).
"""

import asyncio
import signal
import sys
import time
from dataclasses import dataclass

import aiohttp
import redis

from bench.chaos.history import FaultWindow
from bench.chaos.stack import Proc, Stack, answers
from inference.worker_metrics import parse_metrics

KINDS = {
    "worker-kill": "SIGKILL the simulator worker running the most streams; start it again "
    "on its port after the hold",
    "worker-stop": "SIGSTOP the simulator worker running the most streams for the hold (a hung "
    "GPU), then SIGCONT",
    "redis-restart": "shut the primary Redis down (SIGTERM: it writes its AOF) and start it "
    "on the same port and directory (AOF replay)",
    "celery-kill": "SIGKILL the Celery worker of the default queue (the ledger's) and start "
    "it again after the hold",
    "batches-kill": "SIGKILL the batches worker mid-batch and start it again after the hold "
    "(the sweep resumes the batch once its hold is stale)",
    "gateway-term": "SIGTERM gateway 1 (uvicorn's graceful shutdown), wait for it to exit, "
    "start it again on its port",
    "scraper-pause": "SIGSTOP the scraper for the hold, then SIGCONT",
    "cache-fill": "fill the cache Redis to its maxmemory with keys it may not evict, hold, "
    "then delete them",
}
GATEWAY_DRAIN_TIMEOUT_S = 60.0
FILL_VALUE = b"x" * (1024 * 1024)


@dataclass(frozen=True)
class FaultSpec:
    at: float  # a fraction of the run's duration
    kind: str
    hold_s: float


SCHEDULES: dict[str, list[FaultSpec]] = {
    "default": [
        FaultSpec(0.10, "worker-kill", 10),
        FaultSpec(0.20, "worker-stop", 20),
        FaultSpec(0.30, "redis-restart", 0),
        FaultSpec(0.40, "celery-kill", 10),
        FaultSpec(0.50, "gateway-term", 0),
        FaultSpec(0.62, "scraper-pause", 15),
        FaultSpec(0.72, "cache-fill", 30),
        FaultSpec(0.82, "batches-kill", 5),
    ],
    "compressed": [
        FaultSpec(0.08, "worker-kill", 5),
        FaultSpec(0.20, "worker-stop", 10),
        FaultSpec(0.33, "redis-restart", 0),
        FaultSpec(0.45, "celery-kill", 5),
        FaultSpec(0.56, "gateway-term", 0),
        FaultSpec(0.70, "scraper-pause", 8),
        FaultSpec(0.82, "cache-fill", 8),
    ],
    "none": [],
}


def schedule(name: str, only: list[str] | None = None) -> list[FaultSpec]:
    """A named schedule, restricted to the kinds in `only` when given."""
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}: {', '.join(SCHEDULES)}")
    unknown = set(only or []) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)}: {', '.join(KINDS)}")
    return [spec for spec in SCHEDULES[name] if only is None or spec.kind in only]


def say(text: str) -> None:
    print(f"chaos: {text}", file=sys.stderr, flush=True)


class Faults:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.windows: list[FaultWindow] = []
        self.skipped: list[str] = []  # faults not done: the load had ended when their turn came

    async def run(self, specs: list[FaultSpec], duration_s: float, started: float) -> None:
        """Each fault at its time (monotonic `started` + at x duration), one at a time."""
        for spec in specs:
            await asyncio.sleep(max(0.0, started + spec.at * duration_s - time.monotonic()))
            if time.monotonic() >= started + duration_s:
                self.skipped.append(spec.kind)
                say(f"{spec.kind} skipped: the load has ended")
                continue
            window = FaultWindow(spec.kind, "", time.time())
            self.windows.append(window)
            say(f"{spec.kind} at t={time.monotonic() - started:.1f} s")
            try:
                await getattr(self, spec.kind.replace("-", "_"))(window, spec.hold_s)
            except Exception as exc:
                window.notes.append(f"the fault itself failed: {type(exc).__name__}: {exc}")
            window.ended_at = window.ended_at or time.time()
            say(f"{spec.kind} undone after {window.ended_at - window.started_at:.1f} s")

    async def _busiest_simulator(self) -> tuple[int, float]:
        """The simulator running the most requests now, and how many."""
        counts = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            for number, url in enumerate(self.stack.sim_urls):
                try:
                    async with session.get(f"{url}/metrics") as response:
                        counts.append((parse_metrics(await response.text()).running, number))
                except (aiohttp.ClientError, TimeoutError):
                    counts.append((-1.0, number))
        running, number = max(counts)
        return number, running

    async def worker_kill(self, window: FaultWindow, hold_s: float) -> None:
        number, running = await self._busiest_simulator()
        sim = self.stack.sims[number]
        window.started_at = time.time()
        sim.kill()
        window.detail = f"sim-{number} SIGKILLed with {running:g} requests running"
        await asyncio.sleep(hold_s)
        sim.start()
        await answers(f"{self.stack.sim_urls[number]}/health", sim)

    async def worker_stop(self, window: FaultWindow, hold_s: float) -> None:
        number, running = await self._busiest_simulator()
        sim = self.stack.sims[number]
        window.started_at = time.time()
        sim.signal(signal.SIGSTOP)
        window.detail = f"sim-{number} SIGSTOPped for {hold_s:g} s with {running:g} running"
        await asyncio.sleep(hold_s)
        sim.signal(signal.SIGCONT)

    async def redis_restart(self, window: FaultWindow, hold_s: float) -> None:
        server = self.stack.primary
        client = redis.Redis.from_url(server.url, socket_timeout=2)
        before = await asyncio.to_thread(client.dbsize)
        window.started_at = time.time()
        server.signal(signal.SIGTERM)
        if not await server.exited(30):
            window.notes.append("Redis did not shut down within 30 s: SIGKILLed")
            server.kill()
        down_at = time.time()
        await asyncio.sleep(hold_s)
        server.start()
        await server.ready()
        window.ended_at = time.time()
        after = await asyncio.to_thread(client.dbsize)
        config = await asyncio.to_thread(client.config_get, "append*")
        client.close()
        window.detail = (
            f"shutdown took {down_at - window.started_at:.2f} s, down "
            f"{window.ended_at - down_at:.2f} s; {before} keys before, {after} after the AOF "
            f"replay ({config.get('appendonly')}, appendfsync {config.get('appendfsync')})"
        )

    async def _kill_and_restart(self, proc: Proc, window: FaultWindow, hold_s: float) -> None:
        window.started_at = time.time()
        proc.kill()
        window.detail = f"{proc.name} SIGKILLed, started again after {hold_s:g} s"
        await asyncio.sleep(hold_s)
        proc.start()

    async def celery_kill(self, window: FaultWindow, hold_s: float) -> None:
        await self._kill_and_restart(self.stack.worker, window, hold_s)

    async def batches_kill(self, window: FaultWindow, hold_s: float) -> None:
        await self._kill_and_restart(self.stack.batches, window, hold_s)

    async def gateway_term(self, window: FaultWindow, hold_s: float) -> None:
        number = 1
        gateway = self.stack.gateways[number]
        window.gateway = number
        window.started_at = time.time()
        gateway.signal(signal.SIGTERM)
        if await gateway.exited(GATEWAY_DRAIN_TIMEOUT_S):
            drained = f"exited {time.time() - window.started_at:.2f} s after SIGTERM"
        else:
            drained = f"still running {GATEWAY_DRAIN_TIMEOUT_S:g} s after SIGTERM: SIGKILLed"
            window.notes.append(drained)
            gateway.kill()
        await asyncio.sleep(hold_s)
        gateway.start()
        await answers(f"{self.stack.gateway_urls[number]}/readyz", gateway, timeout_s=60)
        window.detail = f"gateway-{number} {drained}; ready again"

    async def scraper_pause(self, window: FaultWindow, hold_s: float) -> None:
        window.started_at = time.time()
        self.stack.scraper.signal(signal.SIGSTOP)
        window.detail = f"scraper SIGSTOPped for {hold_s:g} s"
        await asyncio.sleep(hold_s)
        self.stack.scraper.signal(signal.SIGCONT)

    async def cache_fill(self, window: FaultWindow, hold_s: float) -> None:
        client = redis.Redis.from_url(self.stack.cache.url, socket_timeout=5)
        window.started_at = time.time()
        filled, refusal = await asyncio.to_thread(_fill, client)
        memory = await asyncio.to_thread(client.info, "memory")
        window.detail = (
            f"{filled} MiB written until Redis refused ({refusal}); used "
            f"{memory.get('used_memory_human')} of {memory.get('maxmemory_human')}"
        )
        await asyncio.sleep(hold_s)
        await asyncio.to_thread(_empty, client)
        client.close()


def _fill(client: redis.Redis) -> tuple[int, str]:
    """Keys without a TTL (volatile-lru may not evict them), 1 MiB each, until OOM."""
    for number in range(100_000):
        try:
            client.set(f"chaos:fill:{number}", FILL_VALUE)
        except redis.exceptions.ResponseError as exc:
            return number, str(exc)[:80]
    return 100_000, "never"


def _empty(client: redis.Redis) -> None:
    keys = list(client.scan_iter("chaos:fill:*", count=1000))
    for start in range(0, len(keys), 500):
        client.delete(*keys[start : start + 500])
