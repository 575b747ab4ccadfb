"""How load is offered: closed loop (N clients, each sends its next request when the last
one ends) or open loop (arrivals at a rate, whether or not earlier requests finished).

Closed loop shows throughput at a concurrency but hides queueing: a slow server slows the
clients down. Open loop keeps arriving, so queueing shows up as latency.
"""

import asyncio
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from bench.loadtest.probe import Endpoint, Outcome, send

Progress = Callable[[int], None]


@dataclass(frozen=True)
class Stop:
    """A level ends after this many requests, or after this many seconds of sending."""

    requests: int | None = None
    duration_s: float | None = None

    def more(self, sent: int, started: float) -> bool:
        if self.requests is not None and sent >= self.requests:
            return False
        return self.duration_s is None or time.perf_counter() - started < self.duration_s


def session_for(timeout_s: float) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
    return aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=timeout_s)
    )


async def closed_loop(
    endpoint: Endpoint,
    bodies: Iterator[dict[str, Any]],
    concurrency: int,
    stop: Stop,
    stream: bool,
    timeout_s: float,
    progress: Progress,
) -> tuple[list[Outcome], float]:
    outcomes: list[Outcome] = []
    sent = 0
    async with session_for(timeout_s) as session:
        started = time.perf_counter()

        async def client() -> None:
            nonlocal sent
            while stop.more(sent, started):
                sent += 1
                outcomes.append(await send(session, endpoint, next(bodies), stream))
                progress(len(outcomes))

        await asyncio.gather(*(client() for _ in range(concurrency)))
        return outcomes, time.perf_counter() - started


def arrival_gaps(rate: float, pattern: str, rng: random.Random) -> Iterator[float]:
    """Seconds between arrivals averaging 1/rate: Poisson (exponential gaps) or bursty
    (gamma gaps with a coefficient of variation of 2: clumps, then lulls)."""
    while True:
        if pattern == "poisson":
            yield rng.expovariate(rate)
        else:
            shape = 0.25
            yield rng.gammavariate(shape, 1 / (rate * shape))


async def open_loop(
    endpoint: Endpoint,
    bodies: Iterator[dict[str, Any]],
    rate: float,
    pattern: str,
    stop: Stop,
    stream: bool,
    timeout_s: float,
    progress: Progress,
    seed: int = 0,
) -> tuple[list[Outcome], float]:
    outcomes: list[Outcome] = []
    tasks: set[asyncio.Task[None]] = set()
    gaps = arrival_gaps(rate, pattern, random.Random(seed))
    async with session_for(timeout_s) as session:
        started = time.perf_counter()
        next_at, sent = started, 0

        async def one(body: dict[str, Any]) -> None:
            outcomes.append(await send(session, endpoint, body, stream))
            progress(len(outcomes))

        while stop.more(sent, started):
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            task = asyncio.create_task(one(next(bodies)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            sent += 1
            next_at += next(gaps)
        await asyncio.gather(*tasks)
        return outcomes, time.perf_counter() - started
