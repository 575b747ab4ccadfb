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
  replica started by the loop is held out of service for the scaled start-up time, and a
  sleeping one (a warm pool that sleeps) wakes in the scaled wake time.
- not scaled: the requests themselves. A request takes the worker's real TTFT and
  inter-token time, and is measured against the TTFT target in wall seconds.
"""

import asyncio
import logging
import signal
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import aiohttp
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections

from foundation.redis_clients import reset_clients, sync_redis
from inference.client import close_http_session
from inference.models import ModelDeployment, Worker
from inference.scraper import Scraper
from inference.snapshot import SNAPSHOT_KEY, FleetView
from scaling.autoscale.decide import needed
from scaling.autoscale.history import buckets_key, samples_key
from scaling.autoscale.loop import AutoscaleLoop, LeaderLock
from scaling.autoscale.types import PolicySpec
from scaling.models import AutoscalePolicy, ScalingDecision
from scaling.replay.live.clock import TimeScale
from scaling.replay.live.driver import LoadDriver
from scaling.replay.live.load import fit_rate_scale
from scaling.replay.live.options import LiveOptions, LiveReplayError
from scaling.replay.live.processes import ReplayActuator, replay_scraper
from scaling.replay.live.report import LiveResult, live_result
from scaling.replay.live.settings_override import settings_overridden
from scaling.replay.traces import Demand
from scaling.routing.dispatcher import Dispatcher
from scaling.routing.queue_depth import QueuePublisher

logger = logging.getLogger(__name__)

READY_TIMEOUT_S = 60.0  # the initial fleet must answer health checks within this
DRAIN_WAIT_S = 30.0  # after the window: requests still running get this long to finish
STOP_WAIT_S = 10.0  # then, cancelled, this long to end: the replay never hangs on one


class LiveReplay:
    """One controller (reactive or predictive) over one trace window. run() is sync: it
    prepares the database, runs the event loop, and always stops every process."""

    def __init__(
        self,
        demand: Demand,
        policy: PolicySpec,
        options: LiveOptions,
        redis_url: str,
        label: str = "",
    ) -> None:
        """label: names this run beside others of the same controller (a warm pool
        variant, scaling/replay/live/pools.py): in its deployment's name and its row."""
        self.demand, self.options, self.redis_url = demand, options, redis_url
        self.label = label
        self.scale = TimeScale(options.speed)
        self.policy = policy
        self.rate_scale = options.rate_scale or fit_rate_scale(demand, policy, options)
        self.actuator = ReplayActuator(options)
        self.driver = LoadDriver(demand, self.rate_scale, options, self.name)
        self.timeline: list[dict[str, float]] = []
        self.tick_errors = 0
        self.policy_id = 0
        # Set when the replay ends: its background loops stop at their next turn even if a
        # cancel was lost. Seen once: the replay hung in its final wait, a 0.1 s loop still
        # running after its cancel (a suspect: on Python 3.11, asyncio.timeout can turn a
        # cancel that lands at its deadline into a TimeoutError, which `except Exception`
        # takes); the cause was not confirmed.
        self.stopping = False
        self.lock_key = f"sluice:autoscale:replay:{self.name}:leader"

    @property
    def name(self) -> str:
        suffix = f"-{self.label}" if self.label else ""
        return f"{self.options.deployment_prefix}-{self.policy.mode}{suffix}"

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
            return live_result(
                policy=self.policy,
                options=self.options,
                rate_scale=self.rate_scale,
                driver=self.driver,
                lives=list(self.actuator.lives.values()),
                timeline=self.timeline,
                tick_errors=self.tick_errors,
                deployment=deployment,
                wall_s=wall,
                label=self.label,
            )

    @contextmanager
    def _settings(self) -> Iterator[None]:
        """This process is the only gateway; the scraper and the fleet view run at the
        scaled scrape interval; a request gives up after queue_timeout_s; Redis is the
        replay's."""
        scrape = self.scale.scrape_s
        with settings_overridden(
            {
                "REDIS_URL": self.redis_url,
                "GATEWAY_PROCESSES": 1,
                "QUEUE_TIMEOUT_S": self.options.queue_timeout_s,
                "FLEET_REFRESH_S": min(settings.FLEET_REFRESH_S, scrape),
                "FLEET_SCRAPE_INTERVAL_S": scrape,
            }
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
                "worker_kind": ModelDeployment.WorkerKind.SIMULATED,
            },
        )
        for worker in Worker.objects.filter(deployment=deployment).exclude(state="dead"):
            self.actuator.stop_replica(worker)  # a crashed earlier run: stop by pid, checked
        ScalingDecision.objects.filter(deployment=deployment).delete()
        row, _ = AutoscalePolicy.objects.update_or_create(
            deployment=deployment, defaults=policy_row(self.scale.policy(self.policy))
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
                scraper = replay_scraper(deployment.pk, self.actuator.lives)
                background.append(asyncio.create_task(self._scrape_forever(scraper, session)))
                await self._initial_fleet(deployment)
                autoscaler = self._loop()
                # Its queue is published as the gateway's is, at the scaled scrape interval:
                # the loop's queue and demand include what waits in it.
                publisher = QueuePublisher(interval_s=self.scale.scrape_s)
                dispatcher = Dispatcher(fleet=FleetView(), publisher=publisher)
                background.append(
                    asyncio.create_task(self._tick_forever(autoscaler, deployment, dispatcher))
                )
                await self.driver.drive(dispatcher, in_flight)
                background[-1].cancel()  # the loop stops with the window; the scraper serves on
                if in_flight:
                    await asyncio.wait(in_flight, timeout=DRAIN_WAIT_S)
        finally:
            self.stopping = True
            tasks = {*in_flight, *background}
            for task in tasks:
                task.cancel()
            if tasks:
                ended, left = await asyncio.wait(tasks, timeout=STOP_WAIT_S)
                for task in ended:  # read, so none is reported as never retrieved
                    if not task.cancelled() and (failure := task.exception()) is not None:
                        logger.error("live replay: a task ended with an error", exc_info=failure)
                if left:
                    logger.error("live replay: %d task(s) still running after cancel", len(left))
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

    async def _scrape_forever(self, scraper: Scraper, session: aiohttp.ClientSession) -> None:
        interval = self.scale.scrape_s
        while not self.stopping:
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
        while not self.stopping:
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
                        "t": started - self.driver.t0,
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


def policy_row(scaled: PolicySpec) -> dict[str, object]:
    """The replay's AutoscalePolicy row, from the policy on the wall clock. Stored disabled:
    no other autoscaler sharing the database acts on it; the replay ticks it itself. The
    loop reads every threshold from this row, the warm pool's sleep mode included."""
    return {
        "enabled": False,
        "mode": scaled.mode,
        "min_replicas": scaled.min_replicas,
        "max_replicas": scaled.max_replicas,
        "warm_pool": scaled.warm_pool,
        "warm_pool_sleeps": scaled.warm_sleeps,
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
    }
