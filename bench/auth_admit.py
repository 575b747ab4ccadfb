"""Measure what authentication and admission cost a request, on the real Redis path.

Latency is measured one request at a time (time.perf_counter around each await), so the
percentiles are per-request costs, not a throughput artefact; throughput is measured
separately with many requests in flight.
"""

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from gateway.accounts.authentication import authenticate_key
from gateway.accounts.quotas import AdmissionRequest, admit, reconcile
from gateway.accounts.records import key_records, limits_for_team, team_limits


@dataclass(frozen=True)
class Measured:
    name: str
    count: int
    p50_ms: float
    p99_ms: float
    mean_ms: float


def _percentile(sorted_values: list[float], share: float) -> float:
    index = min(int(len(sorted_values) * share), len(sorted_values) - 1)
    return sorted_values[index]


async def measure(name: str, step: Callable[[], Awaitable[object]], count: int) -> Measured:
    for _ in range(min(count // 10, 500)):  # warm connections, scripts and caches
        await step()
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        await step()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return Measured(
        name, count, _percentile(samples, 0.5), _percentile(samples, 0.99), statistics.mean(samples)
    )


async def throughput(step: Callable[[], Awaitable[object]], concurrency: int, total: int) -> float:
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await step()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return total / (time.perf_counter() - started)


async def run_bench(
    raw_key: str, team_id: int, count: int, concurrency: int
) -> tuple[list[Measured], float]:
    async def authenticate_cached() -> object:
        return await authenticate_key(raw_key, "inference")

    async def authenticate_from_redis() -> object:
        key_records.clear_local()
        team_limits.clear_local()
        record = await authenticate_key(raw_key, "inference")
        return await limits_for_team(record.team_id)

    limits = await limits_for_team(team_id)
    reservation = await admit(limits, AdmissionRequest(team_id, "bench", 200, 100))

    async def admit_only() -> None:
        await admit(limits, AdmissionRequest(team_id, "bench", 200, 100))

    async def settle() -> None:
        await reconcile(reservation, 250, 0)

    async def hot_path() -> None:
        record = await authenticate_key(raw_key, "inference")
        limits = await limits_for_team(record.team_id)
        await admit(limits, AdmissionRequest(record.team_id, record.lookup_id, 200, 100))

    steps: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("authenticate (process cache hit)", authenticate_cached),
        ("authenticate + limits (Redis, process cache cold)", authenticate_from_redis),
        ("admit (1 Lua call)", admit_only),
        ("reconcile (1 Lua call, after the response)", settle),
        ("authenticate + admit (hot path)", hot_path),
    ]
    results = [await measure(name, step, count) for name, step in steps]
    rate = await throughput(hot_path, concurrency, count)
    return results, rate
