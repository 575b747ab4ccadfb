"""One chaos run from start to report: start the stack, create the teams, drive the load
while the faults run, end the batch, drain the ledger, stop everything, check, report.

Why the order at the end: the checks read the ledger, so every request must have settled
(the load has ended and every stream with it) and every usage event must be in the
database. The Celery worker gets the first chance to drain the usage stream (that is what
is being tested); whatever it has not moved within LEDGER_DRAIN_S (a killed worker's batch
waits USAGE_RECLAIM_IDLE_S, 30 s, before another consumer may take it) is moved by the
same ingest in this process once the platform is stopped, and the report says how many
records that was. Database work happens outside the event loop (Django's ORM is sync).
"""

import asyncio
import json
import sys
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import redis.asyncio
from django.conf import settings

from bench.chaos import faults as chaos_faults
from bench.chaos.batch import BatchRun
from bench.chaos.checks import CheckResult, run_checks
from bench.chaos.faults import Faults, FaultSpec
from bench.chaos.history import BatchResult, History, LedgerRow, TeamLimits
from bench.chaos.load import Client, Gateways, LoadSetup, Recorder, drive, until_served
from bench.chaos.report import render
from bench.chaos.stack import Stack, StackSetup
from bench.chaos.world import World, plan_teams
from foundation.redis_clients import reset_clients
from gateway.usage.ledger import GROUP, STREAM, ingest
from gateway.usage.models import UsageRecord
from inference import fleet

LEDGER_DRAIN_S = 90.0


@dataclass(frozen=True)
class Options:
    stack: StackSetup = field(default_factory=StackSetup)
    duration_s: float = 600.0
    load: float = 0.7  # offered arrivals, as a share of the fleet's capacity
    schedule: str = "default"
    faults: list[str] | None = None  # only these kinds of the schedule
    batch_lines: int = 2000
    idle_sockets: int = 2
    idle_s: float = 150.0
    grace_s: float = 15.0
    seed: int = 0
    run_dir: Path = Path()


@dataclass
class Outcome:
    history: History
    results: list[CheckResult]
    report: str

    @property
    def passed(self) -> bool:
        return all(result.passed for result in self.results)


def say(text: str) -> None:
    print(f"chaos: {text}", file=sys.stderr, flush=True)


def tokens_per_request(setup: StackSetup) -> int:
    """Roughly what a request of the load bills: a short prompt plus max_tokens."""
    return 20 + setup.max_tokens


def run(options: Options) -> Outcome:
    specs = chaos_faults.schedule(options.schedule, options.faults)
    setup = options.stack
    rate = options.load * setup.capacity_per_s
    plans = plan_teams(rate, options.duration_s, tokens_per_request(setup))
    stack = Stack(setup, options.run_dir)
    world: World | None = None
    try:
        asyncio.run(stack.start_redis())
        settings.REDIS_URL = stack.primary.url
        settings.CACHE_REDIS_URL = stack.cache.url
        reset_clients()
        world = World.create(plans, setup.slots)
        asyncio.run(stack.start_simulators())
        for url in stack.sim_urls:
            fleet.register_worker(world.deployment, url, registered_by="chaos")
        load = LoadSetup(
            model=world.deployment.name,
            rate_per_s=rate,
            duration_s=options.duration_s,
            max_tokens=setup.max_tokens,
            idle_sockets=options.idle_sockets,
            idle_s=options.idle_s,
            seed=options.seed,
        )
        say(stack.describe())
        say(f"offered load {rate:.1f} requests/s ({options.load:.0%} of capacity)")
        recorder, faults, batch = asyncio.run(_drive(stack, world, load, specs, options))
        stack.stop_platform()
        before = UsageRecord.objects.filter(team_id__in=list(world.team_names())).count()
        late = ingest("chaos-final", reclaim_idle_ms=0)
        ledger = _ledger(world)
        header = _header(stack, world, options, load, late, before)
        if faults.skipped:
            header.append(f"not done (the load had ended first): {', '.join(faults.skipped)}")
        reset_clients()
        world.delete()
        world = None
    finally:
        if world is not None:
            with suppress(Exception):
                world.delete()
        stack.stop_all()
    history = History(
        started_at=recorder.started_at,
        ended_at=recorder.started_at + options.duration_s,
        attempts=recorder.attempts,
        ledger=ledger,
        limits={plan.role: plan.limits for plan in plans},
        faults=faults.windows,
        batch=batch,
        idle_closes=recorder.idle_closes,
        idle_socket_s=options.idle_s,
        grace_s=options.grace_s,
    )
    results = run_checks(history)
    report = render(history, results, header)
    (options.run_dir / "history.json").write_text(json.dumps(history.to_json(), indent=1))
    (options.run_dir / "report.md").write_text(report)
    return Outcome(history, results, report)


async def _drive(
    stack: Stack, world: World, load: LoadSetup, specs: list[FaultSpec], options: Options
) -> tuple[Recorder, Faults, BatchResult | None]:
    await stack.start_platform()
    gateways = Gateways(stack.gateway_urls)
    clients = [Client(m.role, m.key, m.share) for m in world.members if m.share > 0]
    steady = next(client for client in clients if client.team == "steady")
    recorder = Recorder(time.time())
    await until_served(gateways, steady, load, recorder)
    say("both gateways serve; submitting the batch and starting the load")
    batch: BatchRun | None = None
    watching: asyncio.Task[None] | None = None
    if options.batch_lines:
        member = world.member("batch")
        batch = BatchRun(stack.gateway_urls, member.key, member.role)
        await batch.submit(load.model, options.batch_lines, load.max_tokens)
        watching = asyncio.create_task(batch.watch())
    faults = Faults(stack)
    started = time.monotonic()
    recorder.started_at = time.time()
    breaking = asyncio.create_task(faults.run(specs, load.duration_s, started))
    try:
        await drive(clients, gateways, load, recorder, steady)
        say("load ended; waiting for the fault schedule to finish")
        await breaking
    finally:
        breaking.cancel()
        if watching is not None:
            watching.cancel()
    result = await batch.finish() if batch is not None else None
    if result is not None:
        say(f"batch {result.batch_id} {result.status}")
    await _drain_ledger(stack.primary.url)
    return recorder, faults, result


async def _drain_ledger(url: str) -> None:
    """Until the Celery worker has moved every usage event into the database."""
    client = redis.asyncio.Redis.from_url(url)
    deadline = time.monotonic() + LEDGER_DRAIN_S
    try:
        while time.monotonic() < deadline:
            with suppress(redis.exceptions.RedisError):
                if await client.xlen(STREAM) == 0:
                    return
            await asyncio.sleep(1)
        pending = await client.xpending(STREAM, GROUP)
        say(f"the usage stream still holds events after {LEDGER_DRAIN_S:g} s: {pending}")
    finally:
        await client.aclose()


def _ledger(world: World) -> list[LedgerRow]:
    names = world.team_names()
    return [
        LedgerRow(
            request_id=record.request_id,
            team=names[record.team_id],
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            status=record.status,
            cache_result=record.cache_result,
            created_at=record.created_at.timestamp(),
            latency_ms=record.latency_ms,
            batch_id=record.batch_id,
        )
        for record in UsageRecord.objects.filter(team_id__in=list(names))
    ]


def _header(
    stack: Stack, world: World, options: Options, load: LoadSetup, late: int, before: int
) -> list[str]:
    limits = "; ".join(f"{member.role}: {_limits_text(member.limits)}" for member in world.members)
    return [
        f"stack: {stack.describe()}",
        f"load: {load.rate_per_s:.1f} requests/s offered ({options.load:.0%} of capacity), "
        f"Poisson, for {options.duration_s:g} s; {load.ws_share:.0%} WebSocket, "
        f"{load.stream_share:.0%} of HTTP streamed, {load.deterministic_share:.0%} at "
        f"temperature 0; {options.idle_sockets} sockets idle {options.idle_s:g} s between "
        f"messages; a batch of {options.batch_lines} lines",
        f"teams: {limits}",
        f"schedule: {options.schedule}"
        + (f" (only {', '.join(options.faults)})" if options.faults else ""),
        f"ledger: {late} usage records were still in the stream at the end and moved by the "
        f"final ingest ({before} records in the database before it)",
        f"run directory: {options.run_dir} (logs/, history.json, report.md)",
    ]


def _limits_text(limits: TeamLimits) -> str:
    shown = [
        ("RPM", limits.requests_per_minute),
        ("TPM", limits.tokens_per_minute),
        ("tokens/month", limits.tokens_per_month),
    ]
    return ", ".join(f"{name} {value}" for name, value in shown if value is not None) or "none"
