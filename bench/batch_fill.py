"""Batch lines on idle capacity, measured on a live gateway (docs/benchmarks.md, "Batch lines
on idle capacity", issue 15).

A simulator fleet (`workers` workers of fixed latency: every request the same TTFT and
inter-token gap whatever the load) serves one deployment with max_in_flight_per_worker =
`slots`. Every request asks for exactly max_tokens tokens, so one takes
ttft + (max_tokens - 1) x itl seconds and the fleet's capacity is workers x slots of them at
once: workers x slots / that time requests a second.

Phase A: open-loop interactive load (Poisson arrivals, streamed chat completions, sampled so
nothing is cached) at `load` of that capacity, no batch. Phase B: the same load while a batch
of batch_lines lines (short prompts, max_tokens each) runs, from a Celery worker on the
`batches` queue as `make run` starts one. Each phase sends for warmup_s + duration_s; only
requests sent after warmup_s count (in B the warmup also covers the batch's start).

Reported for each phase, over its measured duration_s: the interactive TTFT (from sending a
request to its first content token, client-side) at P50 and P99 and the ratio B / A; errors;
fleet utilisation, the simulators' `vllm:num_requests_running` sampled every 0.5 s, as mean
running / (workers x slots); in B, batch lines finished per second (the batch's line rows by
finished_at); and the CPU each process used, since everything shares one host: a saturated
gateway would make the TTFT measure CPU contention, not scheduling. At the end the batch is
cancelled (unless it finished) and the command waits for it to end.

The fixed-latency simulators have unbounded capacity: a worker past its slots does not slow
down. So what B can change in the interactive TTFT is the gateway's queueing and the CPU the
batch's processes take; the slots are an accounting limit that the meter (BATCH_HEADROOM,
scaling/routing/batch_meter.py) and the dispatcher enforce, and that the utilisation figures
are measured against. "Worker over its slots" counts samples where a simulator ran more
than its slots. Batch lines go only to a worker with room of its own (the dispatcher's
per-worker allowance), so what it measures is interactive load that rose by more than the
headroom on a worker after its batch lines started (they are never taken back): with
Poisson arrivals and a headroom of one slot that is about 30% of samples at 40% load.

It runs against a private Redis 8 (never a platform's) and the configured database, where it
creates a deployment and two teams (interactive, batch) and deletes them at the end; the
production scraper runs in this process over the bench deployment only.
"""

import asyncio
import io
import json
import os
import random
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from django.conf import settings

from bench.fairness import Child, read_text, served
from bench.loadtest.drivers import arrival_gaps, session_for
from bench.loadtest.probe import Endpoint, Outcome, send
from bench.loadtest.summary import percentile
from foundation.embedded_redis import free_port
from gateway.accounts import actions
from gateway.accounts.models import Team
from gateway.batches.models import BatchLine
from inference import fleet
from inference.models import ModelDeployment
from inference.scraper import Scraper
from inference.worker_metrics import parse_metrics

UPSTREAM_MODEL = "sim"
REQUEST_TIMEOUT_S = 120.0
SAMPLE_EVERY_S = 0.5
ENDED = {"completed", "cancelled", "failed", "expired"}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Setup:
    workers: int = 2
    slots: int = 10  # max_in_flight_per_worker
    ttft_ms: float = 200.0
    itl_ms: float = 30.0
    max_tokens: int = 16  # every reply (interactive and batch) is exactly this long
    load: float = 0.4  # interactive arrivals, as a share of the fleet's capacity
    duration_s: float = 60.0  # measured sending time per phase
    warmup_s: float = 10.0  # sent before it, not counted
    batch_lines: int = 20_000
    scrape_s: float = 1.0  # the scraper's interval (FLEET_SCRAPE_INTERVAL_S's default)
    headroom: float | None = None  # BATCH_HEADROOM for the batch runner; None: the setting
    seed: int = 0

    @property
    def request_s(self) -> float:
        """How long one request takes on a worker."""
        return (self.ttft_ms + (self.max_tokens - 1) * self.itl_ms) / 1000

    @property
    def slots_total(self) -> int:
        return self.workers * self.slots

    @property
    def capacity_per_s(self) -> float:
        return self.slots_total / self.request_s

    @property
    def rate_per_s(self) -> float:
        """Interactive arrivals a second."""
        return self.load * self.capacity_per_s

    def describe(self) -> str:
        headroom = settings.BATCH_HEADROOM if self.headroom is None else self.headroom
        return (
            f"{self.workers} simulator workers x {self.slots} slots, fixed TTFT "
            f"{self.ttft_ms:g} ms then {self.itl_ms:g} ms a token, {self.max_tokens} tokens: "
            f"{self.request_s:.3f} s a request, capacity {self.capacity_per_s:.1f} requests/s; "
            f"interactive {self.rate_per_s:.1f} requests/s ({self.load:.0%}), Poisson, "
            f"{self.duration_s:g} s measured after {self.warmup_s:g} s; batch of "
            f"{self.batch_lines} lines; BATCH_HEADROOM {headroom:g}; scrape every "
            f"{self.scrape_s:g} s\n"
        )


@dataclass(frozen=True)
class Sent:
    at_s: float  # when it was sent, from the start of the phase's load
    outcome: Outcome


@dataclass
class Phase:
    name: str
    with_batch: bool
    sent: list[Sent] = field(default_factory=list)
    running: list[float] = field(default_factory=list)  # fleet-wide samples, measured window
    peak_worker_running: float = 0.0  # the most one worker ran in one sample
    worker_samples: int = 0  # one per worker per sample
    over_slots: int = 0  # of them, a worker running more than its slots
    cpu: dict[str, float] = field(default_factory=dict)  # cores used, per process kind
    window: tuple[float, float] = (0.0, 0.0)  # epoch seconds of the measured window
    batch_lines: int = 0  # batch lines finished in the window

    def measured(self, warmup_s: float) -> list[Sent]:
        return [sent for sent in self.sent if sent.at_s >= warmup_s]

    def ttfts(self, warmup_s: float) -> list[float]:
        return [s.outcome.ttft_s for s in self.measured(warmup_s) if s.outcome.ttft_s is not None]

    def ttft(self, warmup_s: float, share: float) -> float:
        return percentile(self.ttfts(warmup_s), share) or float("nan")

    def errors(self, warmup_s: float) -> int:
        return sum(s.outcome.error is not None for s in self.measured(warmup_s))

    def utilisation(self, setup: Setup) -> float:
        if not self.running:
            return float("nan")
        return sum(self.running) / len(self.running) / setup.slots_total

    @property
    def seconds(self) -> float:
        return self.window[1] - self.window[0]

    def line(self, setup: Setup) -> str:
        """One line of progress."""
        warmup = setup.warmup_s
        text = (
            f"{self.name}: {len(self.ttfts(warmup))} interactive requests, TTFT P50 "
            f"{self.ttft(warmup, 0.5):.3f} s, P99 {self.ttft(warmup, 0.99):.3f} s, "
            f"{self.errors(warmup)} errors, utilisation {self.utilisation(setup):.1%}"
        )
        if self.with_batch and self.seconds > 0:
            text += f", batch {self.batch_lines / self.seconds:.1f} lines/s"
        cpu = ", ".join(f"{name} {cores:.0%}" for name, cores in self.cpu.items())
        return f"{text}; CPU {cpu}"


@dataclass
class Result:
    setup: Setup
    phases: list[Phase]
    batch_status: str = ""
    batch_completed: int = 0
    batch_failed: int = 0


@dataclass(frozen=True)
class World:
    """What the bench adds to the database: a deployment, two teams with a key each."""

    deployment: ModelDeployment
    teams: tuple[Team, Team]
    interactive_key: str
    batch_key: str

    @classmethod
    def create(cls, setup: Setup) -> "World":
        tag = secrets.token_hex(4)
        deployment = fleet.ensure_deployment(
            f"bench-batch-{tag}",
            served_model_name=UPSTREAM_MODEL,
            max_in_flight_per_worker=setup.slots,
        )
        unlimited: dict[str, int | None] = {
            "requests_per_minute": 10**9,
            "tokens_per_minute": 2 * 10**9,
            "tokens_per_month": 10**15,
        }
        interactive = actions.create_team(f"bench-batch-interactive-{tag}", **unlimited)
        batch = actions.create_team(f"bench-batch-batch-{tag}", **unlimited)
        return cls(
            deployment,
            (interactive, batch),
            actions.issue_api_key(interactive, name="bench").plaintext,
            actions.issue_api_key(batch, name="bench").plaintext,
        )

    def delete(self) -> None:
        Team.objects.filter(pk__in=[team.pk for team in self.teams]).delete()  # and batches
        self.deployment.delete()  # and its workers


@dataclass
class Processes:
    """The children, by kind, for starting, stopping and CPU accounting."""

    simulators: list[Child] = field(default_factory=list)
    gateway: Child | None = None
    batches: Child | None = None

    def by_kind(self) -> dict[str, list[int]]:
        kinds = {"simulators": [child.process.pid for child in self.simulators]}
        if self.gateway is not None:
            kinds["gateway"] = [self.gateway.process.pid]
        if self.batches is not None:
            kinds["celery"] = [self.batches.process.pid]
        kinds["bench"] = [os.getpid()]
        return kinds

    def stop(self) -> None:
        for child in [self.batches, self.gateway, *self.simulators]:
            if child is not None:
                child.stop()


def start_simulators(setup: Setup, processes: Processes) -> list[str]:
    urls = []
    for _ in range(setup.workers):
        port = free_port()
        args = ["--port", str(port), "--profile", "h100-llama3-8b", "--model", UPSTREAM_MODEL]
        args += ["--fixed-ttft-ms", f"{setup.ttft_ms:g}", "--fixed-itl-ms", f"{setup.itl_ms:g}"]
        processes.simulators.append(Child([sys.executable, "-m", "inference.sim", *args]))
        urls.append(f"http://127.0.0.1:{port}")
    return urls


def platform_env(redis_url: str, files: Path, setup: Setup) -> dict[str, str]:
    """What the gateway and the batches worker share, as `make run` gives both one env."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gateway.settings",
        "REDIS_URL": redis_url,
        "CACHE_REDIS_URL": redis_url,
        "DATABASE_URL": settings.DATABASE_URL,
        "SLUICE_WORKERS": "",  # the bench registers its own workers
        "GATEWAY_PROCESSES": "1",
        "FLEET_REFRESH_S": "0.2",
        "BATCH_FILE_DIR": str(files),
        "LOG_LEVEL": "WARNING",
    }
    if setup.headroom is not None:
        env["BATCH_HEADROOM"] = f"{setup.headroom:g}"
    return env


def start_gateway(env: dict[str, str]) -> tuple[Child, str]:
    port = free_port()
    server = [sys.executable, "-m", "uvicorn", "gateway.asgi:application"]
    server += ["--port", str(port), "--no-access-log", "--log-level", "warning"]
    return Child(server, env), f"http://127.0.0.1:{port}"


def start_batches_worker(env: dict[str, str]) -> Child:
    """A Celery worker for the batches queue (and the default one), as `make run`'s; solo
    pool, so the runner is this very process (its CPU is what the table shows)."""
    worker = [sys.executable, "-m", "celery", "-A", "gateway", "worker", "--pool", "solo"]
    worker += ["--queues", "batches,celery", "--loglevel", "WARNING", "--hostname"]
    worker += [f"bench-batches-{secrets.token_hex(3)}@%h"]
    worker += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    return Child(worker, env)


def batch_file(setup: Setup, model: str) -> bytes:
    """batch_lines chat lines, each a different short prompt, sampled (never cached)."""
    out = io.BytesIO()
    for number in range(setup.batch_lines):
        prompt = f"Batch line {number}: summarise the quarterly report in one sentence."
        body = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": setup.max_tokens,
            "ignore_eos": True,
            "temperature": 1.0,
        }
        line = {"custom_id": f"line-{number}", "method": "POST", "url": "/v1/chat/completions"}
        out.write(json.dumps({**line, "body": body}).encode() + b"\n")
    return out.getvalue()


class BatchClient:
    """The Batch API as a client sees it (aiohttp: the bench does not need openai)."""

    def __init__(self, base_url: str, key: str) -> None:
        self.base_url = base_url
        self.headers = {"Authorization": f"Bearer {key}"}

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        async with (
            session_for(REQUEST_TIMEOUT_S) as session,
            session.request(
                method, f"{self.base_url}{path}", headers=self.headers, **kwargs
            ) as response,
        ):
            body: dict[str, Any] = await response.json()
            if response.status != 200:
                raise RuntimeError(f"{method} {path}: {response.status} {body}")
            return body

    async def upload(self, content: bytes) -> str:
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", content, filename="bench.jsonl", content_type="application/jsonl")
        return str((await self._call("POST", "/files", data=form))["id"])

    async def create(self, file_id: str) -> str:
        body = {
            "input_file_id": file_id,
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
        }
        return str((await self._call("POST", "/batches", json=body))["id"])

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        return await self._call("GET", f"/batches/{batch_id}")

    async def cancel(self, batch_id: str) -> dict[str, Any]:
        return await self._call("POST", f"/batches/{batch_id}/cancel")

    async def wait_for(
        self, batch_id: str, statuses: set[str], timeout_s: float, worker: Child
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if worker.process.poll() is not None:
                raise RuntimeError(f"the Celery worker exited ({worker.process.returncode})")
            batch = await self.retrieve(batch_id)
            if batch["status"] in statuses:
                return batch
            await asyncio.sleep(0.5)
        raise RuntimeError(f"batch {batch_id} did not reach {statuses} within {timeout_s} s")


def interactive_bodies(phase: str, setup: Setup) -> Iterator[dict[str, Any]]:
    number = 0
    while True:
        question = f"Phase {phase}, request {number}: what is the capital of France?"
        yield {
            "messages": [{"role": "user", "content": question}],
            "max_tokens": setup.max_tokens,
            "ignore_eos": True,
            "temperature": 1.0,  # sampled: never cached or coalesced
        }
        number += 1


async def open_loop(endpoint: Endpoint, setup: Setup, phase: Phase) -> None:
    """Poisson arrivals at the interactive rate for warmup_s + duration_s, each a streamed
    request; returns when the last has ended."""
    bodies = interactive_bodies(phase.name, setup)
    gaps = arrival_gaps(setup.rate_per_s, "poisson", random.Random(setup.seed))
    tasks: set[asyncio.Task[None]] = set()
    async with session_for(REQUEST_TIMEOUT_S) as session:
        started = time.perf_counter()
        until = started + setup.warmup_s + setup.duration_s
        next_at = started

        async def one(body: dict[str, Any], at_s: float) -> None:
            phase.sent.append(Sent(at_s, await send(session, endpoint, body, True)))

        while next_at < until:
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            task = asyncio.create_task(one(next(bodies), next_at - started))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            next_at += next(gaps)
        await asyncio.gather(*tasks)


async def worker_running(session: aiohttp.ClientSession, url: str) -> float:
    async with session.get(f"{url}/metrics") as response:
        return parse_metrics(await response.text()).running


async def sample_running(sim_urls: list[str], phase: Phase, seconds: float, slots: int) -> None:
    """The fleet's running requests every SAMPLE_EVERY_S for `seconds`."""
    timeout = aiohttp.ClientTimeout(total=2)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        deadline = time.monotonic() + seconds
        next_at = time.monotonic()
        while next_at < deadline:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            counts = await asyncio.gather(*(worker_running(session, url) for url in sim_urls))
            phase.running.append(sum(counts))
            phase.peak_worker_running = max(phase.peak_worker_running, *counts)
            phase.worker_samples += len(counts)
            phase.over_slots += sum(count > slots for count in counts)
            next_at += SAMPLE_EVERY_S


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process (Linux); 0 where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def host_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole host since boot (Linux); zeros where unknown."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values) - idle) / CLOCK_TICKS, sum(values) / CLOCK_TICKS


class CpuMeter:
    """Cores used per process kind (and the host's busy share) between start and stop."""

    def __init__(self, processes: Processes) -> None:
        self.kinds = processes.by_kind()
        self.before = self._read()
        self.host_before = host_busy()
        self.started = time.monotonic()

    def _read(self) -> dict[str, float]:
        return {kind: sum(cpu_seconds(pid) for pid in pids) for kind, pids in self.kinds.items()}

    def stop(self) -> dict[str, float]:
        elapsed = time.monotonic() - self.started
        after = self._read()
        used = {kind: (after[kind] - self.before[kind]) / elapsed for kind in self.kinds}
        busy, total = host_busy()
        if total > self.host_before[1]:
            cores = os.cpu_count() or 1
            used["host"] = (busy - self.host_before[0]) / (total - self.host_before[1]) * cores
        return used


async def measured_window(
    setup: Setup, phase: Phase, sim_urls: list[str], processes: Processes
) -> None:
    """After warmup_s: utilisation samples and CPU over the duration_s that counts."""
    await asyncio.sleep(setup.warmup_s)
    cpu = CpuMeter(processes)
    start = time.time()
    await sample_running(sim_urls, phase, setup.duration_s, setup.slots)
    phase.window = (start, time.time())
    phase.cpu = cpu.stop()


def lines_finished(batch_id: str, window: tuple[float, float]) -> int:
    start, end = (datetime.fromtimestamp(moment, tz=UTC) for moment in window)
    return BatchLine.objects.filter(
        batch_id=batch_id, finished_at__gte=start, finished_at__lt=end
    ).count()


async def run_phase(
    setup: Setup, phase: Phase, endpoint: Endpoint, sim_urls: list[str], processes: Processes
) -> None:
    window = asyncio.create_task(measured_window(setup, phase, sim_urls, processes))
    await open_loop(endpoint, setup, phase)
    await window


async def drained(sim_urls: list[str], timeout_s: float = 120) -> None:
    """Until no worker runs anything: the previous phase's requests are gone."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        texts = [await asyncio.to_thread(read_text, f"{url}/metrics") for url in sim_urls]
        if all(parse_metrics(text).running == 0 for text in texts):
            return
        await asyncio.sleep(0.3)
    raise RuntimeError("the workers still run requests of a finished phase")


async def scrape_forever(scraper: Scraper, every_s: float) -> None:
    async with aiohttp.ClientSession() as session:
        while True:
            await scraper.scrape_once(session)
            await asyncio.sleep(every_s)


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def measure(
    setup: Setup, world: World, redis_url: str, sim_urls: list[str], processes: Processes
) -> Result:
    """Start the gateway and the batches worker, then phase A (interactive alone) and phase
    B (interactive while the batch runs); cancel the batch and wait for it to end."""
    scraper = Scraper(deployment_id=world.deployment.pk)
    scraping = asyncio.create_task(scrape_forever(scraper, setup.scrape_s))
    with tempfile.TemporaryDirectory(prefix="sluice-bench-batch-") as files:
        env = platform_env(redis_url, Path(files), setup)
        processes.gateway, url = start_gateway(env)
        processes.batches = start_batches_worker(env)
        try:
            return await _phases(setup, world, url, sim_urls, processes, processes.batches)
        finally:
            scraping.cancel()
            with suppress(asyncio.CancelledError):
                await scraping
            processes.stop()


async def _phases(
    setup: Setup,
    world: World,
    url: str,
    sim_urls: list[str],
    processes: Processes,
    worker: Child,
) -> Result:
    assert processes.gateway is not None
    await processes.gateway.wait_for(f"{url}/readyz", "the gateway")
    name = world.deployment.name
    interactive = Endpoint(f"{url}/v1", world.interactive_key, name, "interactive")
    await served(interactive)
    client = BatchClient(f"{url}/v1", world.batch_key)
    file_id = await client.upload(batch_file(setup, name))  # before A: its CPU is no phase's
    result = Result(setup, [])

    alone = Phase("A (no batch)", with_batch=False)
    await run_phase(setup, alone, interactive, sim_urls, processes)
    result.phases.append(alone)
    progress(alone.line(setup))
    await drained(sim_urls)

    batch_id = await client.create(file_id)
    await client.wait_for(batch_id, {"in_progress", *ENDED}, 120, worker)
    with_batch = Phase("B (with batch)", with_batch=True)
    await run_phase(setup, with_batch, interactive, sim_urls, processes)
    await asyncio.sleep(1.5)  # finished lines are kept every 0.5 s
    with_batch.batch_lines = await asyncio.to_thread(lines_finished, batch_id, with_batch.window)
    result.phases.append(with_batch)
    progress(with_batch.line(setup))

    batch = await client.retrieve(batch_id)
    if batch["status"] not in ENDED:
        await client.cancel(batch_id)
    batch = await client.wait_for(batch_id, ENDED, 300, worker)
    result.batch_status = batch["status"]
    result.batch_completed = batch["request_counts"]["completed"]
    result.batch_failed = batch["request_counts"]["failed"]
    progress(f"batch {batch_id}: {result.batch_status}, {result.batch_completed} lines answered")
    return result


def _format(value: float, digits: int = 3) -> str:
    return "n/a" if value != value else f"{value:.{digits}f}"  # NaN: nothing measured


def table(result: Result) -> str:
    """Interactive TTFT, utilisation and batch throughput per phase; then CPU per process."""
    setup = result.setup
    warmup = setup.warmup_s
    alone = result.phases[0]
    headroom = settings.BATCH_HEADROOM if setup.headroom is None else setup.headroom
    lines = [
        "| phase | interactive requests | errors | TTFT P50 s | TTFT P99 s | P50 x A | P99 x A "
        "| batch lines/s | utilisation | peak on one worker | worker over its slots |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for phase in result.phases:
        p50, p99 = phase.ttft(warmup, 0.5), phase.ttft(warmup, 0.99)
        rate = phase.batch_lines / phase.seconds if phase.with_batch and phase.seconds else 0.0
        lines.append(
            f"| {phase.name} | {len(phase.ttfts(warmup))} | {phase.errors(warmup)} "
            f"| {_format(p50)} | {_format(p99)} | {_format(p50 / alone.ttft(warmup, 0.5), 2)} "
            f"| {_format(p99 / alone.ttft(warmup, 0.99), 2)} "
            f"| {_format(rate, 1) if phase.with_batch else '-'} "
            f"| {phase.utilisation(setup):.1%} "
            f"| {phase.peak_worker_running:.0f} / {setup.slots} "
            f"| {phase.over_slots / max(1, phase.worker_samples):.0%} of samples |"
        )
    interactive_slots = setup.rate_per_s * setup.request_s
    target = setup.workers * int(setup.slots * (1 - headroom))
    lines += [
        "",
        f"Expected: interactive holds {interactive_slots:.1f} of {setup.slots_total} slots "
        f"({interactive_slots / setup.slots_total:.0%}); the meter fills to "
        f"{target} ({target / setup.slots_total:.0%}, headroom {headroom:g}), so about "
        f"{max(0.0, target - interactive_slots) / setup.request_s:.1f} batch lines/s.",
        f"The batch ended {result.batch_status} with {result.batch_completed} of "
        f"{setup.batch_lines} lines answered ({result.batch_failed} failed).",
        "",
        "| phase | " + " | ".join(f"CPU {kind}" for kind in alone.cpu) + " |",
        "|---|" + "---|" * len(alone.cpu),
    ]
    for phase in result.phases:
        cells = " | ".join(f"{phase.cpu.get(kind, 0.0):.0%}" for kind in alone.cpu)
        lines.append(f"| {phase.name} | {cells} |")
    lines.append(f"(CPU in cores: 100% is one core of {os.cpu_count()}.)")
    return "\n".join(lines) + "\n"
