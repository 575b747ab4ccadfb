"""Routing policies compared on one shared-prefix, multi-tenant trace, at equal hardware.

Each policy gets fresh simulator processes (cold prefix caches, same profile, same count)
and the same seeded trace: Poisson arrivals; each request is one tenant's long system
prompt plus a short question of its own; one tenant is hot (hot_share of the traffic), the
others share the rest evenly. Requests go through a Dispatcher and stream_completion, as
the gateway sends them, minus HTTP in front. A poller stands in for the fleet scraper,
reading each simulator's /metrics once a second, so routing sees what it sees in
production: scraped queues a second old plus this process's own in-flight count.

TTFT counts from a request's arrival (its wait in the dispatcher's queue included) to its
first content token. Requests arriving during the warm-up (the first warmup_s) are sent
but not counted: every policy must compute each prefix once before any cache can hold it.
Load per worker is this process's in-flight count sampled every 0.1 s (time-averaged), and
every routing decision is checked against the bounded-load cap, (1 + epsilon) x average.
"""

import asyncio
import random
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from django.conf import settings

from foundation.embedded_redis import free_port
from inference.client import close_http_session
from inference.sim.profiles import PROFILES
from inference.snapshot import FleetView, WorkerView
from inference.worker_metrics import parse_metrics
from scaling.routing.dispatcher import Dispatcher
from scaling.routing.hash_ring import EPSILON
from scaling.routing.policies import new_router
from scaling.routing.prefix import route_context
from scaling.routing.router import Load, RouteContext, Router
from scaling.routing.streaming import stream_completion

MODEL = "sim"
WORDS = [
    "policy",
    "refund",
    "order",
    "account",
    "shipping",
    "invoice",
    "contract",
    "support",
    "customer",
    "product",
    "warranty",
    "return",
    "billing",
    "plan",
    "upgrade",
    "delivery",
    "region",
    "privacy",
    "terms",
    "agent",
]


@dataclass(frozen=True)
class Workload:
    tenants: int = 48
    system_words: int = 2000
    hot_share: float = 0.5
    rate: float = 14.0  # requests per second, Poisson
    duration_s: float = 60.0
    warmup_s: float = 15.0
    question_words: int = 40
    max_tokens: int = 16
    seed: int = 1


@dataclass(frozen=True)
class Arrival:
    at: float
    tenant: int
    messages: list[dict[str, str]]


def trace(workload: Workload) -> list[Arrival]:
    """The same arrivals for every policy: tenant 0 is the hot one."""
    rng = random.Random(workload.seed)
    systems = [
        f"You are tenant {t}'s assistant. "
        + " ".join(rng.choice(WORDS) for _ in range(workload.system_words))
        for t in range(workload.tenants)
    ]
    arrivals: list[Arrival] = []
    at = 0.0
    while (at := at + rng.expovariate(workload.rate)) < workload.duration_s:
        hot = rng.random() < workload.hot_share
        tenant = 0 if hot else rng.randrange(1, workload.tenants)
        question = f"Question {len(arrivals)}: " + " ".join(
            rng.choice(WORDS) for _ in range(workload.question_words)
        )
        arrivals.append(
            Arrival(
                at,
                tenant,
                [
                    {"role": "system", "content": systems[tenant]},
                    {"role": "user", "content": question},
                ],
            )
        )
    return arrivals


class Simulators:
    """N simulator processes of one profile, started fresh and stopped together."""

    def __init__(self, count: int, profile: str) -> None:
        ports = [free_port() for _ in range(count)]
        self.urls = [f"http://127.0.0.1:{port}" for port in ports]
        root = Path(settings.BASE_DIR)
        self.processes = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "inference.sim",
                    "--port",
                    str(port),
                    "--profile",
                    profile,
                    "--model",
                    MODEL,
                ],
                cwd=root,
            )
            for port in ports
        ]
        for url in self.urls:
            self._wait(url)

    def _wait(self, url: str) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with suppress(OSError), urllib.request.urlopen(f"{url}/health", timeout=1):  # noqa: S310
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"simulator at {url} did not start")

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(timeout=10)


class PolledFleet(FleetView):
    """The fleet snapshot without Redis or a database: this process scrapes /metrics."""

    def __init__(self, urls: list[str], max_in_flight: int) -> None:
        super().__init__()
        self.urls, self.max_in_flight = urls, max_in_flight
        self._workers = [self._view(i, url, None) for i, url in enumerate(urls)]
        self.hits = self.queries = 0.0

    def _view(self, index: int, url: str, text: str | None) -> WorkerView:
        reading = parse_metrics(text or "")
        return WorkerView(
            id=index,
            url=url,
            deployment=MODEL,
            upstream_model=MODEL,
            state="ready",
            max_in_flight=self.max_in_flight,
            labels={},
            healthy=True,
            running=reading.running,
            waiting=reading.waiting,
            kv_usage=reading.kv_usage,
            prefix_hit_rate=None,
            ttft_p50_s=None,
            ttft_p99_s=None,
            scraped_at=time.time(),
            error="",
        )

    async def workers(self) -> list[WorkerView]:
        return self._workers

    async def scrape(self, session: aiohttp.ClientSession) -> list[str]:
        async def one(url: str) -> str:
            async with session.get(f"{url}/metrics") as response:
                return await response.text()

        texts = await asyncio.gather(*(one(url) for url in self.urls))
        pairs = enumerate(zip(self.urls, texts, strict=True))
        self._workers = [self._view(index, url, text) for index, (url, text) in pairs]
        return texts

    async def poll_forever(self) -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                await self.scrape(session)
                await asyncio.sleep(settings.FLEET_SCRAPE_INTERVAL_S)

    async def prefix_hit_rate(self) -> float:
        async with aiohttp.ClientSession() as session:
            readings = [parse_metrics(text) for text in await self.scrape(session)]
        queries = sum(r.prefix_queries for r in readings)
        return sum(r.prefix_hits for r in readings) / queries if queries else 0.0


class MeasuredRouter(Router):
    """A policy's router that also checks each choice against the bounded-load cap."""

    def __init__(self, router: Router) -> None:
        super().__init__(router.name, router.filters, router.scorers, router.picker)
        self.within_bound = self.decisions = 0

    def route(
        self, workers: Sequence[WorkerView], request: RouteContext, load: Load
    ) -> WorkerView | None:
        chosen = super().route(workers, request, load)
        if chosen is not None:
            self.decisions += 1
            self.within_bound += load.requests(chosen) < load.capacity(workers, EPSILON)
        return chosen


async def sample_in_flight(dispatcher: Dispatcher, totals: Counter[str]) -> None:
    while True:
        totals.update(dispatcher.in_flight)
        await asyncio.sleep(0.1)


@dataclass
class Outcome:
    arrival: Arrival
    ttft_s: float | None = None
    tokens: int = 0
    worker: str = ""
    error: str = ""
    done_at: float = 0.0


@dataclass
class PolicyResult:
    policy: str
    outcomes: list[Outcome]
    elapsed_s: float
    hit_rate: float
    urls: list[str] = field(default_factory=list)
    in_flight: Counter[str] = field(default_factory=Counter)  # summed samples per worker
    bound: tuple[int, int] = (0, 0)  # decisions within the cap, decisions


async def _one(
    dispatcher: Dispatcher, policy: str, arrival: Arrival, max_tokens: int, started: float
) -> Outcome:
    loop, outcome = asyncio.get_running_loop(), Outcome(arrival)
    body = {"messages": arrival.messages, "max_tokens": max_tokens, "ignore_eos": True}
    route = route_context(MODEL, policy, arrival.messages)
    try:
        async for lease, chunk in stream_completion(dispatcher, MODEL, body, route=route):
            outcome.worker = lease.worker.url
            if any((c.get("delta") or {}).get("content") for c in chunk.get("choices", [])):
                outcome.tokens += 1
                if outcome.ttft_s is None:
                    outcome.ttft_s = loop.time() - started - arrival.at
    except Exception as exc:
        outcome.error = type(exc).__name__
    outcome.done_at = loop.time() - started
    return outcome


async def run_policy(
    policy: str, urls: list[str], arrivals: list[Arrival], workload: Workload, max_in_flight: int
) -> PolicyResult:
    fleet = PolledFleet(urls, max_in_flight)
    router = MeasuredRouter(new_router(policy, random.Random(workload.seed)))  # fresh, seeded
    dispatcher = Dispatcher(fleet=fleet, routers=lambda _: router)
    in_flight: Counter[str] = Counter()
    background = [
        asyncio.create_task(fleet.poll_forever()),
        asyncio.create_task(sample_in_flight(dispatcher, in_flight)),
    ]
    loop = asyncio.get_running_loop()
    started, tasks = loop.time(), []
    for arrival in arrivals:
        await asyncio.sleep(max(started + arrival.at - loop.time(), 0))
        tasks.append(
            asyncio.create_task(_one(dispatcher, policy, arrival, workload.max_tokens, started))
        )
    outcomes = list(await asyncio.gather(*tasks))
    for task in background:
        task.cancel()
    hit_rate = await fleet.prefix_hit_rate()
    await close_http_session()
    return PolicyResult(
        policy,
        outcomes,
        loop.time() - started,
        hit_rate,
        urls,
        in_flight,
        (router.within_bound, router.decisions),
    )


def compare(
    policies: list[str],
    workload: Workload,
    workers: int,
    profile: str,
    max_in_flight: int | None = None,
) -> list[PolicyResult]:
    arrivals = trace(workload)
    slots = max_in_flight or PROFILES[profile].max_num_seqs
    results = []
    for policy in policies:
        simulators = Simulators(workers, profile)
        try:
            results.append(
                asyncio.run(run_policy(policy, simulators.urls, arrivals, workload, slots))
            )
        finally:
            simulators.stop()
    return results


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] if ordered else float("nan")


def _shares(counts: Counter[str], urls: list[str]) -> str:
    total = sum(counts.values()) or 1
    return " / ".join(f"{100 * counts[url] / total:.0f}" for url in urls)


def table(results: list[PolicyResult], workload: Workload) -> str:
    rows = [
        "| policy | requests | errors | TTFT P50 s | TTFT P99 s | req/s | output tok/s "
        "| prefix-cache hit rate | requests per worker % | in-flight per worker % "
        "| hot tenant per worker % | choices within the load cap |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        steady = [o for o in result.outcomes if o.arrival.at >= workload.warmup_s]
        ttfts = [o.ttft_s for o in steady if o.ttft_s is not None and not o.error]
        ok = [o for o in result.outcomes if not o.error]
        makespan = max((o.done_at for o in ok), default=result.elapsed_s)
        workers = Counter(o.worker for o in ok)
        hot = Counter(o.worker for o in ok if o.arrival.tenant == 0)
        rows.append(
            f"| {result.policy} | {len(steady)} | {sum(1 for o in steady if o.error)} "
            f"| {_quantile(ttfts, 0.5):.3f} | {_quantile(ttfts, 0.99):.3f} "
            f"| {len(ok) / makespan:.1f} | {sum(o.tokens for o in ok) / makespan:.0f} "
            f"| {result.hit_rate:.0%} | {_shares(workers, result.urls)} "
            f"| {_shares(result.in_flight, result.urls)} | {_shares(hot, result.urls)} "
            f"| {result.bound[0]}/{result.bound[1]} |"
        )
    return "\n".join(rows)


def summary(results: list[PolicyResult], workload: Workload) -> dict[str, Any]:
    """P99 TTFT per policy, for the ratio the issue asks for."""
    return {
        r.policy: _quantile(
            [
                o.ttft_s
                for o in r.outcomes
                if o.ttft_s is not None and not o.error and o.arrival.at >= workload.warmup_s
            ],
            0.99,
        )
        for r in results
    }
