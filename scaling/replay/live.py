"""Trace replay in real time: real simulator processes, the real loop, real requests.

`manage.py replay TRACE --live` drives a trace's arrivals (scaled down in rate, compressed
in time) through a Dispatcher and scaling.routing.streaming.stream_completion against simulator
processes that the LocalProcessActuator starts and stops, while the production
AutoscaleLoop (decide(), the forecast, the Redis history and lease, ScalingDecision rows)
ticks against the fleet snapshot that the production Scraper publishes to Redis.

What is real: the processes, their HTTP and SSE, the scraper (health, /metrics, promotion
to ready), the loop's tick_deployment, decide(), the actuator (start, register, drain,
stop), the dispatcher's slots and queue, and every request's time to first token.

What is scaled (docs/autoscaling.md, "Live replay"):
- rate: trace req/s x rate_scale become req/s on the wall clock;
- time: one wall second is `speed` trace seconds. The arrival rate changes `speed` times
  faster, and the policy's clock runs `speed` times faster to match: the tick, the scrape
  interval, the up/down windows, both cooldowns and the start-up time are divided by
  speed (the policy row stores whole seconds, so they are rounded; the report prints the
  effective values), and so are the forecaster's trend windows, bucket and periods. A
  replica started by the loop is held out of service for the scaled start-up time.
- not scaled: the requests themselves. A request takes the worker's real TTFT and
  inter-token time, and is measured against the TTFT target in wall seconds.
"""

import asyncio
import logging
import math
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

import aiohttp
import numpy as np
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.test.utils import override_settings

from foundation.redis_clients import reset_clients, sync_redis
from inference import fleet
from inference.client import UpstreamError, close_http_session
from inference.models import ModelDeployment, Worker
from inference.scraper import HealthTrack, Scraper
from inference.snapshot import SNAPSHOT_KEY, FleetView, WorkerView
from scaling.autoscale.actuators.base import Replica
from scaling.autoscale.actuators.local import LocalProcessActuator
from scaling.autoscale.decide import needed
from scaling.autoscale.forecast import Forecaster
from scaling.autoscale.history import buckets_key, samples_key
from scaling.autoscale.loop import AutoscaleLoop, LeaderLock
from scaling.autoscale.types import PolicySpec
from scaling.models import AutoscalePolicy, ScalingDecision
from scaling.replay.simulated import ReplayResult
from scaling.replay.traces import Demand
from scaling.routing.dispatcher import Dispatcher, NoHealthyWorker, QueueTimeout
from scaling.routing.streaming import stream_completion

logger = logging.getLogger(__name__)

PRODUCTION_TICK_S = 15.0
MIN_TICK_S = 0.25  # below this the loop's database work would take the 2 cores
PRODUCTION_SCRAPE_S = 1.0  # FLEET_SCRAPE_INTERVAL_S's default
MIN_SCRAPE_S = 0.1  # the scraper's floor on 2 cores
READY_TIMEOUT_S = 60.0  # the initial fleet must answer health checks within this
DRAIN_WAIT_S = 30.0  # after the window: requests still running get this long to finish
FIXED = "fixed"
PEAK_SHARE = 0.9  # the auto rate scale's peak, as a share of max_replicas - 1 at the target
# Starts the simulator after the scaled start-up time: the process answers nothing while
# "loading", exactly as a vLLM server that is still loading weights.
_DELAYED_START = (
    "import runpy, sys, time; time.sleep(float(sys.argv.pop(1))); "
    "runpy.run_module('inference.sim', run_name='__main__', alter_sys=True)"
)


class LiveReplayError(RuntimeError):
    """The live replay could not run (a replica never came up, the lease was taken)."""


@dataclass(frozen=True)
class LiveOptions:
    speed: float = 30.0  # trace seconds per wall second
    rate_scale: float | None = None  # wall req/s per trace req/s; None: auto (fit_rate_scale)
    start_s: float = 0.0  # trace second the measured window starts at
    duration_s: float | None = None  # trace seconds to replay; None: to the trace's end
    lead_in_s: float = 300.0  # trace seconds at the first second's rate, not measured
    tokens: int = 16  # chunks streamed per request (ignore_eos: exactly this many)
    output_tokens: float = 200.0  # the trace's (mean over the window): how long a request
    # holds its slot, as in the simulated replay's FleetModel
    prompt_words: int = 32
    worker: str = FIXED  # fixed-latency simulator, or a simulator profile name
    worker_ttft_s: float = 0.25  # fixed-latency worker: first token after this ...
    per_token_s: float = 0.015  # ... then output_tokens x this, over tokens - 1 gaps
    ttft_target_s: float = 1.0
    queue_timeout_s: float = 10.0  # a request queued this long in the dispatcher gives up
    gpu_cost_per_hour: float = 4.0
    seed: int = 0
    deployment_prefix: str = "replay-live"

    @property
    def worker_itl_s(self) -> float:
        """The fixed-latency worker's gap between chunks: a request streams `tokens` chunks
        but lasts as long as one of output_tokens (fewer chunks spare the client's CPU)."""
        return self.per_token_s * self.output_tokens / max(self.tokens - 1, 1)

    @property
    def service_s(self) -> float:
        """Wall seconds a request holds its slot on a fixed-latency worker: FleetModel's
        base_ttft_s + per_token_s x output tokens."""
        return self.worker_ttft_s + (self.tokens - 1) * self.worker_itl_s


@dataclass(frozen=True)
class TimeScale:
    """The policy's clock, divided by speed (see the module docstring)."""

    speed: float

    @property
    def tick_s(self) -> float:
        return max(PRODUCTION_TICK_S / self.speed, MIN_TICK_S)

    @property
    def scrape_s(self) -> float:
        """The scrape interval (1 s) / speed, floored. Its ratio to the tick matters: a new
        replica is `ready` one scrape before it is healthy in the snapshot, and a tick in
        that gap counts it as serving but neither as loading nor as capacity, so a
        saturated fleet steps again (production: a 1 s gap in a 15 s tick)."""
        return min(max(PRODUCTION_SCRAPE_S / self.speed, MIN_SCRAPE_S), self.tick_s)

    def seconds(self, trace_s: float) -> int:
        """A policy duration on the wall clock, in whole seconds (the row's fields are
        integers), at least 1."""
        return max(round(trace_s / self.speed), 1)

    def policy(self, policy: PolicySpec) -> PolicySpec:
        return replace(
            policy,
            scale_up_window_s=self.seconds(policy.scale_up_window_s),
            scale_down_window_s=self.seconds(policy.scale_down_window_s),
            scale_up_cooldown_s=self.seconds(policy.scale_up_cooldown_s),
            scale_down_cooldown_s=self.seconds(policy.scale_down_cooldown_s),
            startup_time_s=self.seconds(policy.startup_time_s),
        )

    def forecaster(self, base: Forecaster | None = None) -> Forecaster:
        base = base or Forecaster()
        return Forecaster(
            periods=tuple(p / self.speed for p in base.periods),
            bucket_s=base.bucket_s / self.speed,
            trend_windows_s=tuple(w / self.speed for w in base.trend_windows_s),
            max_ratio=base.max_ratio,
        )

    def describe(self, policy: PolicySpec) -> str:
        """What was scaled, as effective trace seconds (rounding shows)."""
        scaled = self.policy(policy)

        def pair(name: str, trace: float, wall: float) -> str:
            return f"{name} {trace:g}->{wall:g} s (= {wall * self.speed:g} trace s)"

        return ", ".join(
            [
                pair("tick", PRODUCTION_TICK_S, self.tick_s),
                pair("scrape", PRODUCTION_SCRAPE_S, self.scrape_s),
                pair("up window", policy.scale_up_window_s, scaled.scale_up_window_s),
                pair("down window", policy.scale_down_window_s, scaled.scale_down_window_s),
                pair("up cooldown", policy.scale_up_cooldown_s, scaled.scale_up_cooldown_s),
                pair("down cooldown", policy.scale_down_cooldown_s, scaled.scale_down_cooldown_s),
                pair("start-up", policy.startup_time_s, scaled.startup_time_s),
                "forecast windows "
                + "/".join(f"{w:g}" for w in Forecaster().trend_windows_s)
                + "->"
                + "/".join(f"{w:g}" for w in self.forecaster().trend_windows_s)
                + " s",
            ]
        )


def window(demand: Demand, start_s: float, duration_s: float | None) -> Demand:
    """The trace's seconds [start, start + duration)."""
    first = max(int(start_s), 0)
    last = (
        demand.seconds if duration_s is None else min(first + math.ceil(duration_s), demand.seconds)
    )
    if last <= first:
        raise ValueError(
            f"the trace has no seconds in [{start_s:g}, {last}) (it is {demand.seconds} s long)"
        )
    return Demand(
        rate=demand.rate[first:last],
        output_tokens=demand.output_tokens[first:last],
        meta=demand.meta,
    )


def mean_output_tokens(demand: Demand) -> float:
    """Output tokens per request over the window, weighted by rate (200 when unknown)."""
    total = sum(demand.rate)
    tokens = sum(r * t for r, t in zip(demand.rate, demand.output_tokens, strict=True))
    return tokens / total if total > 0 and tokens > 0 else 200.0


def fit_rate_scale(demand: Demand, policy: PolicySpec, options: LiveOptions) -> float:
    """Scale the window's peak to 90% of what max_replicas - 1 replicas carry at the target
    utilisation: the peak is reachable with a replica to spare, and does not sit on the
    boundary where one more replica is needed (which would make GPU-hours a coin toss)."""
    peak = max(demand.rate, default=0.0)
    if peak <= 0:
        return 1.0
    per_replica = policy.slots_per_replica * policy.target_utilisation / options.service_s
    return PEAK_SHARE * max(policy.max_replicas - 1, 1) * per_replica / peak


def arrivals(
    demand: Demand, rate_scale: float, speed: float, lead_in_s: float, seed: int
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Poisson arrival times in wall seconds from the window's start (the lead-in's are
    negative): trace second s carries rate(s) x rate_scale per wall second for 1/speed."""
    rng = np.random.default_rng(seed)
    lead = int(lead_in_s)
    rates = np.asarray([demand.rate[0]] * lead + list(demand.rate), dtype=float)
    counts = rng.poisson(rates * rate_scale / speed)
    seconds = np.repeat(np.arange(-lead, demand.seconds, dtype=float), counts)
    times: np.ndarray[Any, np.dtype[np.float64]] = np.sort(
        (seconds + rng.random(len(seconds))) / speed
    )
    return times


@dataclass
class ReplicaLife:
    url: str
    pid: int
    started: float  # monotonic
    warm: bool
    initial: bool
    ready: float | None = None
    stopped: float | None = None
    exited: bool = False  # the process died on its own (reconcile found it)


class ReplayActuator(LocalProcessActuator):
    """The LocalProcessActuator with the replay's worker command and a record of every
    replica's life (start, ready, stop) for GPU-seconds."""

    def __init__(self, options: LiveOptions) -> None:
        profile = "h100-llama3-8b" if options.worker == FIXED else options.worker
        super().__init__(worker="sim", sim_profile=profile)
        self.options = options
        self.startup_delay_s = 0.0
        self.initial = True
        self.lives: dict[str, ReplicaLife] = {}

    def command(self, deployment: ModelDeployment, port: int) -> list[str]:
        args = super().command(deployment, port)[3:]  # after python -m inference.sim
        if self.options.worker == FIXED:
            args += [
                "--fixed-ttft-ms",
                f"{self.options.worker_ttft_s * 1000:g}",
                "--fixed-itl-ms",
                f"{self.options.worker_itl_s * 1000:g}",
            ]
        if self.startup_delay_s > 0:
            return [sys.executable, "-c", _DELAYED_START, f"{self.startup_delay_s:g}", *args]
        return [sys.executable, "-m", "inference.sim", *args]

    def start_replica(
        self, deployment: ModelDeployment, *, warm: bool = False, spot: bool = False
    ) -> Replica:
        replica = super().start_replica(deployment, warm=warm, spot=spot)
        self.lives[replica.url] = ReplicaLife(
            url=replica.url,
            pid=int(replica.key),
            started=time.monotonic(),
            warm=warm,
            initial=self.initial,
        )
        return replica

    def stop_replica(self, worker: Worker) -> None:
        super().stop_replica(worker)
        self._ended(worker.url)

    def reconcile(self, deployment: ModelDeployment) -> None:
        for url, process in self.processes.items():
            if process.poll() is not None and url in self.lives:
                self._ended(url, exited=True)
        super().reconcile(deployment)

    def _ended(self, url: str, exited: bool = False) -> None:
        life = self.lives.get(url)
        if life is not None and life.stopped is None:
            life.stopped, life.exited = time.monotonic(), exited

    def stop_everything(self) -> None:
        """SIGTERM every process at once, then wait (a SIGKILL after 10 s), then mark the
        workers dead: faster than stopping them one by one when a run ends or is cut."""
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for url, process in list(self.processes.items()):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
            self._ended(url)
            worker = Worker.objects.filter(url=url).first()
            if worker is not None:
                fleet.set_worker_state(worker, Worker.State.DEAD, "live replay ended")
            del self.processes[url]


class ReplayScraper(Scraper):
    """The production scraper, over this replay's deployment only (a shared database may
    hold other deployments' workers), noting when each worker first answered."""

    def __init__(self, deployment_id: int, lives: dict[str, ReplicaLife]) -> None:
        super().__init__()
        self.deployment_id, self.lives = deployment_id, lives

    def _workers(self) -> list[Worker]:
        return list(
            Worker.objects.select_related("deployment")
            .filter(deployment_id=self.deployment_id)
            .exclude(state=Worker.State.DEAD)
        )

    async def scrape_once(self, session: aiohttp.ClientSession) -> list[WorkerView]:
        workers = await sync_to_async(self._workers)()
        views = list(await asyncio.gather(*(self._scrape(session, w) for w in workers)))
        await self._publish(views)
        return views

    async def _update_health(
        self, worker: Worker, track: HealthTrack, ok: bool, error: str
    ) -> None:
        await super()._update_health(worker, track, ok, error)
        life = self.lives.get(worker.url)
        if ok and life is not None and life.ready is None:
            life.ready = time.monotonic()


@dataclass
class LiveRequest:
    at: float  # scheduled, wall seconds from the window's start
    ttft_s: float | None = None  # from the scheduled arrival to the first content token
    error: str = ""
    lag_s: float = 0.0  # how late the driver sent it (a loaded client shows here)


@dataclass
class LiveResult:
    replay: ReplayResult  # requests, met, gpu_hours, cost, events: the simulated replay's shape
    mode: str
    speed: float
    rate_scale: float
    sent: int = 0  # requests the driver sent in the measured window
    measured: int = 0  # of those, ended on their own (a first token or an error; not cut)
    errors: dict[str, int] = field(default_factory=dict)
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    driver_lag_p99_s: float = 0.0
    replica_seconds: float = 0.0  # wall
    peak_serving: int = 0
    replicas: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[dict[str, float]] = field(default_factory=list)
    tick_errors: int = 0
    wall_s: float = 0.0

    @property
    def startup_s(self) -> list[float]:
        """Measured start -> first healthy scrape, wall seconds, for replicas the loop
        started (not the initial fleet)."""
        return [
            r["ready_after_s"]
            for r in self.replicas
            if not r["initial"] and r["ready_after_s"] is not None
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "controller": self.mode,
            "live": True,
            "speed": self.speed,
            "rate_scale": self.rate_scale,
            "requests": self.replay.requests,
            "sent": self.sent,
            "measured": self.measured,
            "met": self.replay.met,
            "attainment": self.replay.attainment,
            "errors": self.errors,
            "ttft_p50_s": self.ttft_p50_s,
            "ttft_p99_s": self.ttft_p99_s,
            "driver_lag_p99_s": self.driver_lag_p99_s,
            "replica_seconds": self.replica_seconds,
            "gpu_hours": self.replay.gpu_hours,
            "cost": self.replay.cost,
            "ups": self.replay.count("up"),
            "downs": self.replay.count("down"),
            "reversals_30m": self.replay.reversals,
            "peak_serving": self.peak_serving,
            "startup_s": self.startup_s,
            "events": self.replay.events,
            "decisions": self.decisions,
            "replicas": self.replicas,
            "timeline": self.timeline,
            "tick_errors": self.tick_errors,
            "wall_s": self.wall_s,
        }


class LiveReplay:
    """One controller (reactive or predictive) over one trace window. run() is sync: it
    prepares the database, runs the event loop, and always stops every process."""

    def __init__(
        self, demand: Demand, policy: PolicySpec, options: LiveOptions, redis_url: str
    ) -> None:
        self.demand, self.options, self.redis_url = demand, options, redis_url
        self.scale = TimeScale(options.speed)
        self.policy = policy
        self.rate_scale = options.rate_scale or fit_rate_scale(demand, policy, options)
        self.actuator = ReplayActuator(options)
        self.requests: list[LiveRequest] = []
        self.timeline: list[dict[str, float]] = []
        self.tick_errors = 0
        self.t0 = self.t_end = 0.0  # monotonic: the measured window
        self.wall_t0 = 0.0  # time.time() at t0 (for ScalingDecision.at)
        self.policy_id = 0
        self.lock_key = f"sluice:autoscale:replay:{self.name}:leader"

    @property
    def name(self) -> str:
        return f"{self.options.deployment_prefix}-{self.policy.mode}"

    def run(self) -> LiveResult:
        with self._settings():
            deployment = self._prepare()
            try:
                started = time.monotonic()
                try:
                    asyncio.run(self._main(deployment))
                except asyncio.CancelledError:  # SIGTERM cancels the main task
                    raise KeyboardInterrupt from None
                wall = time.monotonic() - started
            finally:
                self.actuator.stop_everything()  # idempotent: the async path stopped them
            return self._result(deployment, wall)

    @contextmanager
    def _settings(self) -> Iterator[None]:
        """This process is the only gateway; the scraper and the fleet view run at the
        scaled scrape interval; a request gives up after queue_timeout_s; Redis is the
        replay's."""
        scrape = self.scale.scrape_s
        with override_settings(
            REDIS_URL=self.redis_url,
            GATEWAY_PROCESSES=1,
            QUEUE_TIMEOUT_S=self.options.queue_timeout_s,
            FLEET_REFRESH_S=min(settings.FLEET_REFRESH_S, scrape),
            FLEET_SCRAPE_INTERVAL_S=scrape,
        ):
            reset_clients()
            try:
                yield
            finally:
                reset_clients()

    def _prepare(self) -> ModelDeployment:
        """A deployment of the replay's own (disabled policy: no other autoscaler process
        acts on it), with no leftovers from an earlier run."""
        cost = Decimal(str(self.options.gpu_cost_per_hour))
        deployment, _ = ModelDeployment.objects.update_or_create(
            name=self.name,
            defaults={
                "max_in_flight_per_worker": self.policy.slots_per_replica,
                "gpu_cost_per_hour": cost,
                "served_model_name": "",
                "tier": self.policy.tier,
            },
        )
        for worker in Worker.objects.filter(deployment=deployment).exclude(state="dead"):
            self.actuator.stop_replica(worker)  # a crashed earlier run: stop by pid, checked
        ScalingDecision.objects.filter(deployment=deployment).delete()
        scaled = self.scale.policy(self.policy)
        row, _ = AutoscalePolicy.objects.update_or_create(
            deployment=deployment,
            defaults={
                "enabled": False,
                "mode": scaled.mode,
                "min_replicas": scaled.min_replicas,
                "max_replicas": scaled.max_replicas,
                "warm_pool": scaled.warm_pool,
                "target_utilisation": scaled.target_utilisation,
                "scale_up_utilisation": scaled.scale_up_utilisation,
                "scale_up_queue": scaled.scale_up_queue,
                "ttft_p99_target_s": scaled.ttft_p99_target_s,
                "scale_up_window_s": scaled.scale_up_window_s,
                "scale_down_utilisation": scaled.scale_down_utilisation,
                "scale_down_window_s": scaled.scale_down_window_s,
                "scale_up_cooldown_s": scaled.scale_up_cooldown_s,
                "scale_down_cooldown_s": scaled.scale_down_cooldown_s,
                "startup_time_s": scaled.startup_time_s,
                "allow_spot": scaled.allow_spot,
            },
        )
        self.policy_id = row.pk
        sync_redis().delete(samples_key(self.name), buckets_key(self.name), SNAPSHOT_KEY)
        return deployment

    # the event loop

    async def _main(self, deployment: ModelDeployment) -> None:
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        if main is not None:
            loop.add_signal_handler(signal.SIGTERM, main.cancel)
        background: list[asyncio.Task[None]] = []
        in_flight: set[asyncio.Task[None]] = set()
        try:
            async with aiohttp.ClientSession() as session:
                scraper = ReplayScraper(deployment.pk, self.actuator.lives)
                background.append(asyncio.create_task(self._scrape_forever(scraper, session)))
                await self._initial_fleet(deployment)
                autoscaler = self._loop()
                dispatcher = Dispatcher(fleet=FleetView())
                background.append(
                    asyncio.create_task(self._tick_forever(autoscaler, deployment, dispatcher))
                )
                await self._drive(dispatcher, in_flight)
                background[-1].cancel()  # the loop stops with the window; the scraper serves on
                if in_flight:
                    await asyncio.wait(in_flight, timeout=DRAIN_WAIT_S)
        finally:
            for task in [*in_flight, *background]:
                task.cancel()
            await asyncio.gather(*in_flight, *background, return_exceptions=True)
            await close_http_session()
            await sync_to_async(self.actuator.stop_everything)()
            await sync_to_async(connections.close_all)()
            if main is not None:
                loop.remove_signal_handler(signal.SIGTERM)

    def _loop(self) -> AutoscaleLoop:
        tick = self.scale.tick_s
        autoscaler = AutoscaleLoop(
            self.actuator, sync_redis(), tick_s=tick, forecaster=self.scale.forecaster()
        )
        # Its own lease: a platform autoscaler sharing this Redis keeps its own.
        autoscaler.lock = LeaderLock(
            autoscaler.client, ttl_s=max(3 * tick, 10.0), key=self.lock_key
        )
        return autoscaler

    async def _scrape_forever(self, scraper: ReplayScraper, session: aiohttp.ClientSession) -> None:
        interval = self.scale.scrape_s
        while True:
            started = time.monotonic()
            try:
                await scraper.scrape_once(session)
            except Exception:
                logger.exception("live replay: fleet scrape failed; retrying")
            await asyncio.sleep(max(interval - (time.monotonic() - started), 0.02))

    async def _initial_fleet(self, deployment: ModelDeployment) -> None:
        """Started before the window, sized for its first minute, as in the simulated
        replay; they load without the start-up delay (the fleet was already up)."""
        first = self.demand.rate[:60] or [0.0]
        in_flight = max(first) * self.rate_scale * self.options.service_s
        count = min(
            max(needed(self.policy, in_flight), self.policy.min_replicas, 1),
            self.policy.max_replicas,
        )
        start = sync_to_async(self.actuator.start_replica)
        for _ in range(count):
            await start(deployment)
        for _ in range(self.policy.warm_pool):
            await start(deployment, warm=True)
        # Routable as the dispatcher sees it: ready, and healthy in a published scrape.
        deadline, view = time.monotonic() + READY_TIMEOUT_S, FleetView()
        while len(await view.routable(deployment.name)) < count:
            view.invalidate()
            if time.monotonic() > deadline:
                raise LiveReplayError(
                    f"the initial {count} replicas did not answer within "
                    f"{READY_TIMEOUT_S:g} s: see var/logs/autoscale-*.log"
                )
            await asyncio.sleep(0.1)
        self.actuator.initial = False
        self.actuator.startup_delay_s = float(self.scale.seconds(self.policy.startup_time_s))

    async def _tick_forever(
        self, autoscaler: AutoscaleLoop, deployment: ModelDeployment, dispatcher: Dispatcher
    ) -> None:
        interval = self.scale.tick_s
        while True:
            started = time.monotonic()
            try:
                states = await sync_to_async(self._tick)(autoscaler, self.policy_id)
            except Exception:
                logger.exception("live replay: autoscaler tick failed")
                self.tick_errors += 1
            else:
                name = deployment.name
                self.timeline.append(
                    {
                        "t": started - self.t0,
                        "serving": states["ready"] + states["starting"],
                        "ready": states["ready"],
                        "warm": states["warm"],
                        "draining": states["draining"],
                        "in_flight": sum(dispatcher.in_flight.values()),
                        "queued": dispatcher.queue_length(name),
                    }
                )
            await asyncio.sleep(max(interval - (time.monotonic() - started), 0.02))

    def _tick(self, autoscaler: AutoscaleLoop, policy_id: int) -> Counter[str]:
        """AutoscaleLoop.tick for this deployment alone: the lease, the snapshot, then the
        production tick_deployment (decide, record, actuate)."""
        if not autoscaler.lock.acquire():
            raise LiveReplayError(f"another process holds {self.lock_key}")
        policy = AutoscalePolicy.objects.select_related("deployment").get(pk=policy_id)
        autoscaler.tick_deployment(policy, autoscaler._views(), time.time())
        states = (
            Worker.objects.filter(deployment_id=policy.deployment_id)
            .exclude(state="dead")
            .values_list("state", flat=True)
        )
        return Counter(states)

    async def _drive(self, dispatcher: Dispatcher, in_flight: set[asyncio.Task[None]]) -> None:
        """Send each request at its arrival time (open loop: a slow fleet does not slow
        the arrivals), the lead-in first; the measured window starts at t0."""
        times = arrivals(
            self.demand,
            self.rate_scale,
            self.options.speed,
            self.options.lead_in_s,
            self.options.seed,
        )
        lead = self.options.lead_in_s / self.options.speed
        self.t0 = time.monotonic() + lead
        self.wall_t0 = time.time() + lead
        self.t_end = self.t0 + self.demand.seconds / self.options.speed
        body_words = " ".join(["word"] * self.options.prompt_words)
        for index, at in enumerate(times.tolist()):
            delay = self.t0 + at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            record = LiveRequest(at=at, lag_s=max(-delay, 0.0))
            if at >= 0:
                self.requests.append(record)
            body = {
                "messages": [{"role": "user", "content": f"request {index}: {body_words}"}],
                "max_tokens": self.options.tokens,
                "ignore_eos": True,
            }
            task = asyncio.create_task(self._request(dispatcher, body, record))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
        await asyncio.sleep(max(self.t_end - time.monotonic(), 0.0))

    async def _request(
        self, dispatcher: Dispatcher, body: dict[str, Any], record: LiveRequest
    ) -> None:
        arrived = self.t0 + record.at
        try:
            async with aclosing(stream_completion(dispatcher, self.name, body)) as chunks:
                async for _lease, chunk in chunks:
                    if record.ttft_s is None and any(
                        c.get("delta", {}).get("content") for c in chunk.get("choices", [])
                    ):
                        record.ttft_s = time.monotonic() - arrived
            if record.ttft_s is None:
                record.error = "no_tokens"
        except QueueTimeout:
            record.error = "queue_timeout"
        except NoHealthyWorker:
            record.error = "no_worker"
        except UpstreamError as exc:
            record.error = "upstream_after_first_token" if record.ttft_s is not None else "upstream"
            logger.warning("live replay request failed: %s", exc)
        except asyncio.CancelledError:
            record.error = record.error or "cancelled"
            raise

    # the report

    def _result(self, deployment: ModelDeployment, wall: float) -> LiveResult:
        target, speed = self.options.ttft_target_s, self.options.speed
        done = [
            r for r in self.requests if (r.ttft_s is not None or r.error) and r.error != "cancelled"
        ]
        met = sum(
            1 for r in self.requests if r.ttft_s is not None and r.ttft_s <= target and not r.error
        )
        ttfts = sorted(r.ttft_s for r in self.requests if r.ttft_s is not None)
        replica_s, replicas = 0.0, []
        end = self.t_end or time.monotonic()
        for life in self.actuator.lives.values():
            stopped = life.stopped if life.stopped is not None else end
            replica_s += max(min(stopped, end) - max(life.started, self.t0), 0.0)
            replicas.append(
                {
                    "url": life.url,
                    "pid": life.pid,
                    "initial": life.initial,
                    "warm": life.warm,
                    "started_s": self._trace_s(life.started),
                    "ready_after_s": None if life.ready is None else life.ready - life.started,
                    "stopped_s": None if life.stopped is None else self._trace_s(life.stopped),
                    "exited_on_its_own": life.exited,
                }
            )
        gpu_hours = replica_s * speed / 3600
        events, decisions = self._events(deployment)
        replay = ReplayResult(
            name=f"{self.policy.mode} (live)",
            requests=float(len(self.requests)),
            met=float(met),
            gpu_hours=gpu_hours,
            cost=gpu_hours * self.options.gpu_cost_per_hour,
            events=events,
        )
        errors = Counter(r.error for r in self.requests if r.error)
        return LiveResult(
            replay=replay,
            mode=self.policy.mode,
            speed=speed,
            rate_scale=self.rate_scale,
            sent=len(self.requests),
            measured=len(done),
            errors=dict(errors),
            ttft_p50_s=_quantile(ttfts, 0.5),
            ttft_p99_s=_quantile(ttfts, 0.99),
            driver_lag_p99_s=_quantile(sorted(r.lag_s for r in self.requests), 0.99) or 0.0,
            replica_seconds=replica_s,
            peak_serving=max((int(p["serving"]) for p in self.timeline if p["t"] >= 0), default=0),
            replicas=replicas,
            decisions=decisions,
            timeline=[
                {**p, "t": round(p["t"] * speed + self.options.start_s, 1)} for p in self.timeline
            ],
            tick_errors=self.tick_errors,
            wall_s=wall,
        )

    def _trace_s(self, monotonic: float) -> float:
        return round((monotonic - self.t0) * self.options.speed + self.options.start_s, 1)

    def _events(
        self, deployment: ModelDeployment
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Steps from the ScalingDecision rows, in trace seconds; and every recorded
        decision in the window with its reason."""
        rows = ScalingDecision.objects.filter(deployment=deployment).order_by("at")
        events, decisions = [], []
        end_wall = self.wall_t0 + (self.t_end - self.t0)
        for row in rows:
            wall = row.at.timestamp()
            if not self.wall_t0 <= wall <= end_wall:
                continue
            t = round((wall - self.wall_t0) * self.options.speed + self.options.start_s, 1)
            decisions.append(
                {
                    "t": t,
                    "action": row.action,
                    "rule": row.rule,
                    "from": row.from_replicas,
                    "to": row.to_replicas,
                    "reason": row.reason,
                    "actuated": row.actuated,
                    "error": row.error,
                }
            )
            if row.action in ("up", "down") and row.actuated:
                events.append(
                    {
                        "t": t,
                        "action": row.action,
                        "from": row.from_replicas,
                        "to": row.to_replicas,
                        "rule": row.rule,
                    }
                )
        return events, decisions


def _quantile(ordered: list[float], q: float) -> float | None:
    if not ordered:
        return None
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]
