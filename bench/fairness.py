"""Fair queueing across teams, measured on a live gateway (docs/benchmarks.md, "Fair
queueing across teams").

Two teams share one deployment: one simulator worker of fixed latency (every request the
same TTFT and inter-token gap whatever the load, so all that changes between runs is the
gateway's queue) behind `slots` slots. Team B, the victim, keeps its fair share of the
slots busy: a closed loop of slots / 2 streams. Team A floods: a closed loop of
flood_factor x its own share, so most of its requests wait in the queue. Replies vary in
length around max_tokens. For each setting of FAIR_QUEUEING a fresh gateway process
(uvicorn, as `make run` starts one) serves B alone, then B while A floods (A starts
warmup_s early, so its backlog is queued when B starts).

B's TTFT runs from sending a request to its first content token, its wait in the queue
included. B's requests sent in its own first warmup_s are its ramp: its streams start at
once and, with a flood, find A holding every slot, which they can only take over as A's
requests end. They are reported apart (the slowest), not in the percentiles.

It runs against a private Redis 8 (never a platform's) and the configured database, where
it creates two teams and one deployment and deletes them at the end; the production
scraper runs in this process over the bench deployment only.
"""

import asyncio
import os
import random
import secrets
import subprocess
import sys
import time
import urllib.request
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from django.conf import settings

from bench.loadtest.drivers import session_for
from bench.loadtest.probe import Endpoint, Outcome, send
from bench.loadtest.summary import percentile
from foundation.embedded_redis import free_port
from gateway.accounts import actions
from gateway.accounts.models import Team
from inference import fleet
from inference.models import ModelDeployment
from inference.scraper import Scraper
from inference.worker_metrics import parse_metrics

UPSTREAM_MODEL = "sim"
REQUEST_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Setup:
    slots: int = 32  # max_in_flight_per_worker of the one worker
    ttft_ms: float = 400.0
    itl_ms: float = 100.0
    max_tokens: int = 8  # on average: each reply is 1 to 2 x max_tokens - 1 tokens
    duration_s: float = 30.0  # B's measured sending time per run, after its ramp
    warmup_s: float = 5.0  # A floods this long before B starts; B's ramp is as long
    flood_factor: int = 10

    @property
    def share(self) -> int:
        """Each team's fair share of the slots: half."""
        return max(1, self.slots // 2)


@dataclass(frozen=True)
class Sent:
    at_s: float  # when it was sent, from the start of its team's load
    outcome: Outcome


@dataclass
class Run:
    fair_queueing: bool
    flood: bool
    victim: list[Sent] = field(default_factory=list)
    flooder: list[Sent] = field(default_factory=list)

    def ttfts(self, warmup_s: float, ramp: bool = False) -> list[float]:
        """B's TTFTs of requests sent after its first warmup_s (or during them: the ramp,
        when B's streams start at once and find a flooder holding every slot)."""
        return [
            sent.outcome.ttft_s
            for sent in self.victim
            if (sent.at_s < warmup_s) == ramp and sent.outcome.ttft_s is not None
        ]

    def ttft(self, warmup_s: float, share: float) -> float:
        return percentile(self.ttfts(warmup_s), share) or float("nan")

    def line(self, setup: Setup) -> str:
        """One line of progress."""
        return (
            f"{'fair' if self.fair_queueing else 'FIFO'}, {'flood' if self.flood else 'alone'}: "
            f"B {len(self.ttfts(setup.warmup_s))} requests, TTFT P50 "
            f"{self.ttft(setup.warmup_s, 0.5):.3f} s, P99 {self.ttft(setup.warmup_s, 0.99):.3f} s"
        )

    @property
    def errors(self) -> int:
        return sum(sent.outcome.error is not None for sent in self.victim)


@dataclass(frozen=True)
class World:
    """What the bench adds to the database: a deployment and two teams with a key each."""

    deployment: ModelDeployment
    victim_team: Team
    flooder_team: Team
    victim_key: str
    flooder_key: str

    @classmethod
    def create(cls, setup: Setup) -> "World":
        tag = secrets.token_hex(4)
        deployment = fleet.ensure_deployment(
            f"bench-fairness-{tag}",
            served_model_name=UPSTREAM_MODEL,
            max_in_flight_per_worker=setup.slots,
        )
        unlimited: dict[str, int | None] = {
            "requests_per_minute": 10**9,
            "tokens_per_minute": 2 * 10**9,
            "tokens_per_month": 10**15,
        }
        victim = actions.create_team(f"bench-fairness-b-{tag}", **unlimited)
        flooder = actions.create_team(f"bench-fairness-a-{tag}", **unlimited)
        return cls(
            deployment,
            victim,
            flooder,
            actions.issue_api_key(victim, name="bench").plaintext,
            actions.issue_api_key(flooder, name="bench").plaintext,
        )

    def delete(self) -> None:
        Team.objects.filter(pk__in=[self.victim_team.pk, self.flooder_team.pk]).delete()
        self.deployment.delete()  # and its worker


class Child:
    """A child process whose output goes to stderr (stdout is the report)."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            args, cwd=settings.BASE_DIR, env=env, stdout=sys.stderr, stderr=sys.stderr
        )

    async def wait_for(self, url: str, what: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{what} exited with code {self.process.returncode}")
            with suppress(OSError):
                await asyncio.to_thread(urllib.request.urlopen, url, timeout=1)
                return
            await asyncio.sleep(0.2)
        raise RuntimeError(f"{what} did not answer {url} within {timeout_s} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_simulator(setup: Setup) -> tuple[Child, str]:
    port = free_port()
    args = ["--port", str(port), "--profile", "h100-llama3-8b", "--model", UPSTREAM_MODEL]
    args += ["--fixed-ttft-ms", f"{setup.ttft_ms:g}", "--fixed-itl-ms", f"{setup.itl_ms:g}"]
    return Child([sys.executable, "-m", "inference.sim", *args]), f"http://127.0.0.1:{port}"


def start_gateway(redis_url: str, fair_queueing: bool) -> tuple[Child, str]:
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gateway.settings",
        "REDIS_URL": redis_url,
        "CACHE_REDIS_URL": redis_url,
        "DATABASE_URL": settings.DATABASE_URL,
        "SLUICE_WORKERS": "",  # the bench registers its own worker
        "GATEWAY_PROCESSES": "1",
        "FLEET_REFRESH_S": "0.2",
        "FAIR_QUEUEING": "1" if fair_queueing else "0",
        "LOG_LEVEL": "WARNING",
    }
    server = [sys.executable, "-m", "uvicorn", "gateway.asgi:application"]
    server += ["--port", str(port), "--no-access-log", "--log-level", "warning"]
    return Child(server, env), f"http://127.0.0.1:{port}"


def body(team: str, client: int, number: int, setup: Setup, rng: random.Random) -> dict[str, Any]:
    """A request whose reply is 1 to 2 x max_tokens - 1 tokens long (max_tokens on average).
    Lengths must vary: with one length, requests started together (the flood's first
    wave) would keep ending together, and slots would free in bursts a service time apart."""
    question = f"Team {team}, client {client}, request {number}: tell me a story."
    return {
        "messages": [{"role": "user", "content": question}],
        "max_tokens": rng.randint(1, 2 * setup.max_tokens - 1),
        "ignore_eos": True,
        "temperature": 1.0,  # sampled: never cached or coalesced, every request is queued
    }


async def closed_loop(
    endpoint: Endpoint, team: str, clients: int, until: float, setup: Setup, out: list[Sent]
) -> None:
    """`clients` streams, each sending its next request when the last ends, until `until`
    (perf_counter). Cancelling it drops the requests in flight."""
    rng = random.Random(team)
    async with session_for(REQUEST_TIMEOUT_S) as session:
        started = time.perf_counter()

        async def client(index: int) -> None:
            number = 0
            while (now := time.perf_counter()) < until:
                request = body(team, index, number, setup, rng)
                out.append(Sent(now - started, await send(session, endpoint, request, True)))
                number += 1

        await asyncio.gather(*(client(i) for i in range(clients)))


def read_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (our own child)
        text: str = response.read().decode()
        return text


async def drained(sim_url: str, timeout_s: float = 60) -> None:
    """Until the worker runs nothing: the previous run's requests are gone."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = await asyncio.to_thread(read_text, f"{sim_url}/metrics")
        if parse_metrics(text).running == 0:
            return
        await asyncio.sleep(0.2)
    raise RuntimeError("the worker still runs requests of a finished run")


async def one_run(
    setup: Setup, victim: Endpoint, flooder: Endpoint, fair: bool, flood: bool, sim_url: str
) -> Run:
    run = Run(fair, flood)
    flooding: asyncio.Task[None] | None = None
    if flood:
        forever = time.perf_counter() + 3600
        flooding = asyncio.create_task(
            closed_loop(flooder, "A", setup.flood_factor * setup.share, forever, setup, run.flooder)
        )
        await asyncio.sleep(setup.warmup_s)
    until = time.perf_counter() + setup.warmup_s + setup.duration_s
    await closed_loop(victim, "B", setup.share, until, setup, run.victim)
    if flooding is not None:
        flooding.cancel()
        with suppress(asyncio.CancelledError):
            await flooding
    await drained(sim_url)
    return run


async def scrape_forever(scraper: Scraper) -> None:
    async with aiohttp.ClientSession() as session:
        while True:
            await scraper.scrape_once(session)
            await asyncio.sleep(0.3)


async def measure(setup: Setup, world: World, redis_url: str, sim_url: str) -> list[Run]:
    """B alone, then B with A flooding, on a gateway with FAIR_QUEUEING off, then on."""
    scraping = asyncio.create_task(scrape_forever(Scraper(deployment_id=world.deployment.pk)))
    runs: list[Run] = []
    try:
        for fair in (False, True):
            gateway, url = start_gateway(redis_url, fair)
            try:
                await gateway.wait_for(f"{url}/readyz", "the gateway")
                name = world.deployment.name
                victim = Endpoint(f"{url}/v1", world.victim_key, name, "B")
                flooder = Endpoint(f"{url}/v1", world.flooder_key, name, "A")
                await served(victim)
                for flood in (False, True):
                    runs.append(await one_run(setup, victim, flooder, fair, flood, sim_url))
                    print(runs[-1].line(setup), file=sys.stderr, flush=True)
            finally:
                gateway.stop()
    finally:
        scraping.cancel()
        with suppress(asyncio.CancelledError):
            await scraping
    return runs


async def served(endpoint: Endpoint, timeout_s: float = 30) -> None:
    """Until the gateway serves the deployment (the scraper has published the worker)."""
    deadline = time.monotonic() + timeout_s
    async with session_for(10) as session:
        while time.monotonic() < deadline:
            probe = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
            outcome = await send(session, endpoint, probe, True)
            if outcome.error is None:
                return
            await asyncio.sleep(0.3)
    raise RuntimeError(f"the gateway did not serve {endpoint.model} within {timeout_s} s")


def table(runs: list[Run], setup: Setup) -> str:
    """B's TTFT after its ramp, and as a multiple of B alone on the same gateway."""
    alone = {run.fair_queueing: run for run in runs if not run.flood}
    warmup = setup.warmup_s
    lines = [
        "| queueing | team A | B requests | B TTFT P50 s | B TTFT P99 s | P50 x alone "
        "| P99 x alone | B ramp, slowest s | B errors | A answered/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        base = alone[run.fair_queueing]
        flooding = f"floods ({setup.flood_factor * setup.share} streams)" if run.flood else "idle"
        answered = sum(sent.outcome.error is None for sent in run.flooder)
        p50, p99 = run.ttft(warmup, 0.5), run.ttft(warmup, 0.99)
        lines.append(
            f"| {'fair' if run.fair_queueing else 'FIFO'} | {flooding} "
            f"| {len(run.ttfts(warmup))} | {p50:.3f} | {p99:.3f} "
            f"| {p50 / base.ttft(warmup, 0.5):.2f} | {p99 / base.ttft(warmup, 0.99):.2f} "
            f"| {max(run.ttfts(warmup, ramp=True), default=float('nan')):.3f} | {run.errors} "
            f"| {answered / (2 * warmup + setup.duration_s):.1f} |"
        )
    return "\n".join(lines) + "\n"
