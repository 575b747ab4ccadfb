"""The live loop: each tick, the leader reads the fleet, decides, records and actuates.

One leader at a time: a Redis key taken with SET NX PX and renewed by its holder (a Lua
compare-and-expire), so `manage.py autoscale` can run on several hosts, or beside the
Celery beat task, and only one of them acts. The lock is checked again right before
actuating, so a leader that stalled past its lease does not act on a stale decision.

Each tick the leader also renews a heartbeat and counts its ticks and decisions in Redis
(scaling/autoscale/status.py) for the Tuning page and /metrics, and reads the gateways'
published dispatch queues (scaling/routing/queue_depth.py) into each deployment's sample.
"""

import json
import logging
import time
import uuid

import redis
from django.conf import settings
from django.db import DatabaseError

from foundation.redis_clients import REDIS_FAILURES
from inference import fleet
from inference.models import ModelDeployment, Worker
from inference.snapshot import SNAPSHOT_KEY, WorkerView, worker_view
from inference.worker_labels import on_spot
from scaling.autoscale import sleep_mode, status
from scaling.autoscale.actuators import Actuator, ActuatorError
from scaling.autoscale.decide import decide
from scaling.autoscale.forecast import Forecaster
from scaling.autoscale.history import History, sample_from_views
from scaling.autoscale.record import last_actions, policy_spec, record
from scaling.autoscale.types import READY, STARTING, WARM, Decision, FleetState, WorkerState
from scaling.models import AutoscalePolicy, ScalingDecision
from scaling.routing.queue_depth import read_depths

logger = logging.getLogger(__name__)
LOCK_KEY = "sluice:autoscale:leader"
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class LeaderLock:
    """A lease in Redis: held while renewed within ttl_s; lost when its holder stalls."""

    def __init__(self, client: redis.Redis, ttl_s: float, key: str = LOCK_KEY) -> None:
        self.client, self.key = client, key
        self.ttl_ms = int(ttl_s * 1000)
        self.token = f"{uuid.uuid4().hex}"

    def acquire(self) -> bool:
        """Take the lease if free, or renew it if ours."""
        if self.client.set(self.key, self.token, nx=True, px=self.ttl_ms):
            return True
        return bool(self.client.eval(_RENEW, 1, self.key, self.token, self.ttl_ms))

    def held(self) -> bool:
        return bool(self.client.get(self.key) == self.token)

    def renew(self) -> bool:
        """Renew the lease if it is still ours; never take it (acting on a decision made
        under a lease another process held meanwhile would act on a stale view). False
        too when Redis cannot say."""
        try:
            return bool(self.client.eval(_RENEW, 1, self.key, self.token, self.ttl_ms))
        except redis.exceptions.RedisError as exc:
            logger.warning("autoscaler lease not renewed: Redis failed: %s", exc)
            return False

    def release(self) -> None:
        self.client.eval(_RELEASE, 1, self.key, self.token)


class AutoscaleLoop:
    def __init__(
        self,
        actuator: Actuator,
        client: redis.Redis,
        tick_s: float = 15.0,
        forecaster: Forecaster | None = None,
    ) -> None:
        self.actuator, self.client, self.tick_s = actuator, client, tick_s
        self.forecaster = forecaster or Forecaster()
        self.history = History(client, self.forecaster)
        self.lock = LeaderLock(client, ttl_s=max(3 * tick_s, 10.0))

    def stop(self) -> None:
        """Leaving: the heartbeat goes (the Tuning page says no loop runs) and so does the
        lease (another process, or this one restarted, leads at once)."""
        if self.lock.held():
            status.clear(self.client)
        self.lock.release()

    def tick(self, now: float | None = None) -> list[ScalingDecision] | None:
        """One pass over every enabled policy; None when another process leads."""
        if not self.lock.acquire():
            return None
        now = time.time() if now is None else now
        views = self._views()
        policies = list(AutoscalePolicy.objects.select_related("deployment").filter(enabled=True))
        status.beat(self.client, self.tick_s, self.actuator.name, len(policies))
        out = []
        for policy in policies:
            try:
                row = self.tick_deployment(policy, views, now)
            except DatabaseError:
                raise  # the next tick, whole, once the database answers
            except Exception:  # one deployment's failure must not hold the others
                logger.exception("autoscaler: %s skipped this tick", policy.deployment.name)
                continue
            if row is not None:
                out.append(row)
        status.count_tick(self.client)
        return out

    def tick_deployment(
        self, policy: AutoscalePolicy, views: list[WorkerView], now: float
    ) -> ScalingDecision | None:
        deployment = policy.deployment
        decision, row = self._tick_deployment(policy, views, now)
        if decision is not None:
            status.count_decision(self.client, deployment.name, decision.action)
        return row

    def _tick_deployment(
        self, policy: AutoscalePolicy, views: list[WorkerView], now: float
    ) -> tuple[Decision | None, ScalingDecision | None]:
        """The decision (None: the lease was lost mid-tick) and its diary row (None: an
        unchanged hold or failure, not recorded again)."""
        deployment = policy.deployment
        self.actuator.reconcile(deployment)
        workers = list(
            Worker.objects.filter(deployment=deployment).exclude(state=Worker.State.DEAD)
        )
        mine = {v.id: v for v in views if v.deployment == deployment.name}
        stale = [
            w.url
            for w in workers
            if w.state in ("ready", "draining") and not _fresh(mine.get(w.pk), now)
        ]
        if stale:
            held = _stale(len([w for w in workers if w.state == "ready"]), stale)
            return held, record(deployment, held, now)
        spec = policy_spec(policy)
        queued = self.gateway_queue(deployment.name)
        self.history.record(deployment.name, sample_from_views(mine.values(), now, queued))
        samples = self.history.samples(deployment.name)
        forecast = None
        if spec.predictive:
            horizon = spec.startup_time_s + self.tick_s
            buckets = self.history.buckets(deployment.name, now, horizon)
            forecast = self.forecaster.forecast(samples, buckets, now, horizon)
        state = with_replicas_on_their_way(fleet_state(workers, mine), self._coming(deployment))
        decision = decide(spec, samples, state, now, last_actions(deployment), forecast)
        # Renewed, not only checked: each deployment's actions get a whole lease.
        if decision.changes_fleet and not self.lock.renew():
            logger.warning("lost the autoscaler lease mid-tick; not acting")
            return None, None
        error = ""
        if decision.changes_fleet:
            by_id = {w.pk: w for w in workers}
            decision, error = self.actuate(deployment, decision, by_id, state)
        actuated = decision.changes_fleet and not error
        return decision, record(deployment, decision, now, actuated=actuated, error=error)

    def _coming(self, deployment: ModelDeployment) -> int:
        try:
            return self.actuator.replicas_on_their_way(deployment)
        except ActuatorError as exc:  # counted as none: a start may then be asked again
            logger.warning("could not count %s's replicas on their way: %s", deployment.name, exc)
            return 0

    def gateway_queue(self, deployment: str) -> int:
        """Requests waiting in the gateways' dispatch queues for this deployment (0 when
        Redis cannot say: the workers' own numbers still count)."""
        try:
            return read_depths(self.client).get(deployment, 0)
        except REDIS_FAILURES as exc:
            logger.warning("could not read the gateways' dispatch queues: %s", exc)
            return 0

    def actuate(
        self,
        deployment: ModelDeployment,
        decision: Decision,
        workers: dict[int, Worker],
        state: FleetState,
    ) -> tuple[Decision, str]:
        """Carry the decision out: the decision as carried out (sleeping replicas are woken
        first; one that does not wake is replaced by a new start, one that does not sleep
        stays awake: sleep_mode.py) and the first failure, which stops it ("" if none)."""
        healthy = {w.id for w in state.workers if w.healthy}
        try:
            decision = sleep_mode.wake(self.actuator, decision, workers)
            for worker_id in decision.promote:  # one still loading waits for the scraper
                _set(
                    workers[worker_id], "ready" if worker_id in healthy else "starting", "scale up"
                )
            for _ in range(decision.start):
                self.actuator.start_replica(deployment, spot=decision.spot)
            for _ in range(decision.start_warm):
                self.actuator.start_replica(deployment, warm=True, spot=decision.spot)
            for worker_id in decision.drain:
                _set(workers[worker_id], "draining", "scale down: drain before stop")
            for worker_id in decision.to_warm:
                _set(workers[worker_id], "warm", "drained; kept for the warm pool")
            decision = sleep_mode.sleep(self.actuator, decision, workers)
            for worker_id in decision.stop:
                # Wakes and sleeps can take 30 s each and a stop 20: the lease is renewed
                # before each stop, and a leader that lost it stops acting (two leaders
                # each lowering a Deployment's replicas by one took two pods for one).
                if not self.lock.renew():
                    logger.warning("lost the autoscaler lease while scaling %s down", deployment)
                    return decision, "the autoscaler lease was lost while acting"
                self.actuator.stop_replica(workers[worker_id])
        except ActuatorError as exc:
            logger.error("actuator %s failed for %s: %s", self.actuator.name, deployment, exc)
            return decision, str(exc)
        return decision, ""

    def _views(self) -> list[WorkerView]:
        raw: dict[str, str] = self.client.hgetall(SNAPSHOT_KEY)  # type: ignore[assignment]
        return [worker_view(json.loads(value)) for value in raw.values()]


def fleet_state(workers: list[Worker], views: dict[int, WorkerView]) -> FleetState:
    """Worker rows (the routing state is the database's) with their scraped load. Whether
    one sleeps is what it told the scraper, else what the autoscaler last did to it; a ready
    one found asleep (put to sleep by hand) is no capacity: to decide() it is warm, asleep."""
    states = []
    for w in workers:
        view = views.get(w.pk)
        asleep = view.sleeping if view else bool(w.labels.get("asleep"))
        states.append(
            WorkerState(
                id=w.pk,
                state=WARM if asleep and w.state == READY else w.state,
                in_flight=(view.running + view.waiting) if view else 0.0,
                healthy=bool(view and view.healthy),
                spot=on_spot(w.labels),
                since=w.state_changed_at.timestamp(),
                observed_at=view.scraped_at if view else 0.0,
                managed=w.registered_by.startswith("autoscaler"),
                can_sleep=bool(w.labels.get("sleep_mode")),
                asleep=asleep,
            )
        )
    return FleetState(workers=tuple(states))


def with_replicas_on_their_way(state: FleetState, coming: int) -> FleetState:
    """The fleet with `coming` replicas that have no worker yet, as starting ones: capacity
    on its way (decide() never drains or stops a starting replica). Without them, a pod
    waiting minutes for a GPU node was asked for again at every tick, past max_replicas."""
    placeholders = tuple(
        WorkerState(id=-(n + 1), state=STARTING, healthy=False) for n in range(coming)
    )
    return FleetState(workers=state.workers + placeholders)


def _fresh(view: WorkerView | None, now: float) -> bool:
    return view is not None and now - view.scraped_at < settings.FLEET_STALE_AFTER_S


def _stale(serving: int, urls: list[str]) -> Decision:
    return Decision(
        action="hold",
        rule="stale_metrics",
        from_replicas=serving,
        to_replicas=serving,
        reason=f"no fresh metrics for {', '.join(urls[:5])}: is `manage.py "
        "scrape_workers` running? Not acting on old numbers.",
    )


def _set(worker: Worker, state: str, reason: str) -> None:
    fleet.set_worker_state(worker, state, reason)
