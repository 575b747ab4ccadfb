"""The autoscaler with sleeping warm replicas, end to end: the live loop, the local actuator,
the real scraper and simulator processes (their sleep mode: inference/sim/sleep.py).

A scale-down puts the drained replica to sleep in the warm pool instead of stopping it;
demand then wakes it (in the simulator's configured wake time) instead of starting a new
one, and every decision row says which it did.
"""

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import aiohttp
import pytest

from foundation.redis_clients import sync_redis
from inference import fleet
from inference.models import ModelDeployment, Worker
from inference.scraper import Scraper
from inference.snapshot import SNAPSHOT_KEY, WorkerView
from scaling.autoscale.actuators import ActuatorError
from scaling.autoscale.actuators.local import LocalProcessActuator
from scaling.autoscale.loop import AutoscaleLoop
from scaling.models import AutoscalePolicy, ScalingDecision
from tests.waiting import wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

WAKE_S = 1.0
SLOTS = 2  # max_in_flight_per_worker: two long requests fill a replica


def scrape() -> list[WorkerView]:
    async def once() -> list[WorkerView]:
        async with aiohttp.ClientSession() as session:
            return await Scraper().scrape_once(session)

    return asyncio.run(once())


def states(deployment: ModelDeployment) -> dict[int, str]:
    live = Worker.objects.filter(deployment=deployment).exclude(state="dead")
    return {w.pk: w.state for w in live}


def is_sleeping(worker: Worker) -> bool:
    with urllib.request.urlopen(f"{worker.url}/is_sleeping", timeout=5) as reply:
        return bool(json.loads(reply.read())["is_sleeping"])


def published(worker: Worker) -> WorkerView:
    raw = sync_redis().hget(SNAPSHOT_KEY, str(worker.pk))
    assert raw is not None
    return WorkerView(**json.loads(str(raw)))


def generate(worker: Worker, max_tokens: int) -> int:
    body = {
        "model": "sim-sleepy",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
    }
    request = urllib.request.Request(
        f"{worker.url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as reply:
            reply.read()
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0  # the process was stopped at the end of the test


def load(worker: Worker, streams: int) -> None:
    """Long requests in the background (they end when the test stops the replicas)."""
    for _ in range(streams):
        threading.Thread(target=generate, args=(worker, 50_000), daemon=True).start()


def last_row(deployment: ModelDeployment) -> ScalingDecision:
    row = ScalingDecision.objects.filter(deployment=deployment).order_by("-at", "-pk").first()
    assert row is not None
    return row


@pytest.fixture
def sleepy(settings: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    settings.VAR_DIR = tmp_path
    monkeypatch.setenv("SLUICE_SIM_WAKE_S", str(WAKE_S))  # the replicas' wake time
    deployment = fleet.ensure_deployment(
        "sim-sleepy", max_in_flight_per_worker=SLOTS, worker_kind="simulated"
    )
    AutoscalePolicy.objects.create(
        deployment=deployment,
        mode="reactive",
        min_replicas=1,
        max_replicas=3,
        warm_pool=1,
        warm_pool_sleeps=True,
        scale_up_window_s=1,
        scale_up_cooldown_s=0,
        scale_down_window_s=0,
        scale_down_cooldown_s=0,
    )
    actuator = LocalProcessActuator(sim_profile="h100-llama3-8b")
    try:
        yield deployment, actuator, AutoscaleLoop(actuator, sync_redis())
    finally:
        actuator.stop_all()


def test_scale_down_sleeps_a_replica_in_the_pool_and_demand_wakes_it_instead_of_starting(
    sleepy: Any,
) -> None:
    deployment, actuator, loop = sleepy
    first = actuator.start_replica(deployment)
    second = actuator.start_replica(deployment)
    wait_until(
        lambda: scrape() and set(states(deployment).values()) == {"ready"},
        30,
        "both replicas to be scraped ready",
        poll_s=0.2,
    )

    # Idle: one is drained; no replica is started for the warm pool, the drain will fill it.
    (down,) = loop.tick() or []
    assert down.action == "down" and down.actuated, down.reason
    assert down.inputs["ops"]["start_warm"] == 0 and len(actuator.processes) == 2
    (draining,) = Worker.objects.filter(deployment=deployment, state="draining")

    # Drained and idle: kept in the warm pool, asleep (no GPU memory), not stopped.
    scrape()
    (pooled,) = loop.tick() or []
    assert pooled.action == "warm" and pooled.actuated, pooled.reason
    assert pooled.inputs["ops"]["to_warm"] == [draining.pk]
    assert pooled.inputs["ops"]["sleep"] == [draining.pk]
    assert pooled.inputs["ops"]["stop"] == [] and f"sleep [{draining.pk}]" in pooled.reason
    asleep = Worker.objects.get(pk=draining.pk)
    assert asleep.state == "warm" and asleep.labels["asleep"] and is_sleeping(asleep)
    assert {first.url, second.url} == set(actuator.processes)  # both processes still run

    scrape()
    view = published(asleep)
    assert view.sleeping and not view.routable  # never routed to while it sleeps

    # Demand: the serving replica full for over the (1 s) window.
    (serving,) = Worker.objects.filter(deployment=deployment, state="ready")
    load(serving, SLOTS)
    wait_until(
        lambda: any(v.id == serving.pk and v.running == SLOTS for v in scrape()),
        30,
        "the serving replica to be full",
        poll_s=0.2,
    )
    AutoscalePolicy.objects.filter(deployment=deployment).update(scale_down_window_s=3600)
    now = time.time()
    loop.tick(now)  # the first full sample: the window has just begun
    started = time.monotonic()
    (up,) = loop.tick(now + 2) or []
    took = time.monotonic() - started

    assert up.action == "up" and up.rule == "sustained_up" and up.actuated, up.reason
    ops = up.inputs["ops"]
    assert ops["wake"] == [asleep.pk] and ops["promote"] == [asleep.pk]
    assert ops["start"] == 0  # woken, not started
    assert f"wake [{asleep.pk}] from sleep" in up.reason and f"woke {asleep.pk} in" in up.reason
    assert took >= WAKE_S  # the wake answered once the replica was awake
    woken = Worker.objects.get(pk=asleep.pk)
    assert woken.state == "ready" and not woken.labels["asleep"] and not is_sleeping(woken)
    assert generate(woken, 4) == 200  # serving again

    scrape()
    assert published(woken).routable
    assert last_row(deployment).pk == up.pk
    # The pool is refilled behind it (a new replica, which sleeps once loaded).
    assert ops["start_warm"] == 1 and len(actuator.processes) == 3


def test_a_replica_that_will_not_wake_is_stopped_and_a_new_one_started(
    sleepy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployment, actuator, loop = sleepy
    AutoscalePolicy.objects.filter(deployment=deployment).update(
        min_replicas=0, scale_down_window_s=3600
    )
    warm = actuator.start_replica(deployment, warm=True)
    worker = Worker.objects.get(url=warm.url)
    wait_until(lambda: scrape() and published(worker).healthy, 30, "the warm replica to load")
    (slept,) = loop.tick() or []
    assert slept.inputs["ops"]["sleep"] == [worker.pk] and is_sleeping(worker)
    scrape()

    def wedged(worker: Worker) -> float:  # the one fault injected: a wake that times out
        raise ActuatorError(f"POST {worker.url}/wake_up: timed out")

    monkeypatch.setattr(actuator, "wake_replica", wedged)
    AutoscalePolicy.objects.filter(deployment=deployment).update(min_replicas=1)
    (up,) = loop.tick() or []
    assert up.action == "up" and up.actuated, up.reason
    ops = up.inputs["ops"]
    assert ops["wake"] == [] and ops["promote"] == [] and ops["start"] == 1
    assert ops["stop"] == [worker.pk] and f"wake of {worker.pk} failed" in up.reason
    assert Worker.objects.get(pk=worker.pk).state == "dead"
    assert worker.url not in actuator.processes and len(actuator.processes) == 2  # + pool
