"""The autoscaler as it runs (issue 20): replicas of the deployment's own kind, the gateway's
published dispatch queue as its queue signal, promotion only once healthy, its heartbeat
and counters on the Tuning page and /metrics, and the demo's policy."""

import asyncio
import io
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.db import connections
from django.test import Client
from django.urls import reverse

from foundation.embedded_redis import free_port
from foundation.redis_clients import sync_redis
from gateway.dashboard import actions
from inference import fleet
from inference.models import ModelDeployment, Worker
from inference.scraper import Scraper
from inference.snapshot import SNAPSHOT_KEY, FleetView, WorkerView
from inference.worker_command import EMBEDDED_MODEL
from scaling.autoscale.actuators import ActuatorError
from scaling.autoscale.actuators.local import LocalProcessActuator
from scaling.autoscale.config import actuator_from_settings
from scaling.autoscale.loop import AutoscaleLoop
from scaling.autoscale.status import HEARTBEAT_KEY, read_stats
from scaling.models import AutoscalePolicy, ScalingDecision
from scaling.routing.dispatcher import Dispatcher, Lease
from scaling.routing.queue_depth import QUEUE_KEY, QueuePublisher, field, read_depths
from tests.conftest import MESSAGES, live_platform
from tests.sims import SimProcess
from tests.staff import tuning_staff
from tests.waiting import wait_until


def worker_view(url: str, deployment: str, max_in_flight: int = 1, **load: float) -> WorkerView:
    return WorkerView(
        id=abs(hash(url)) % 10_000,
        url=url,
        deployment=deployment,
        upstream_model=deployment,
        state="ready",
        max_in_flight=max_in_flight,
        labels={},
        healthy=True,
        running=load.get("running", 0.0),
        waiting=load.get("waiting", 0.0),
        kv_usage=0.0,
        prefix_hit_rate=None,
        ttft_p50_s=None,
        ttft_p99_s=None,
        scraped_at=load.get("scraped_at", time.time() + 3600),
        error="",
    )


class StaticFleet(FleetView):
    def __init__(self, workers: list[WorkerView]) -> None:
        super().__init__()
        self._workers = workers

    async def workers(self) -> list[WorkerView]:
        return self._workers


class QueuedRequests:
    """A gateway process's dispatcher, in its own thread and event loop: one worker with one
    slot, taken, and `waiting` requests queued behind it. Its queue is published as the
    gateway's is (a QueuePublisher), every 0.2 s."""

    def __init__(self, deployment: str, waiting: int) -> None:
        self.deployment = deployment
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.waiters: list[asyncio.Future[Lease]] = []
        self._call(self._fill(waiting))

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=10)

    async def _fill(self, waiting: int) -> None:
        worker = worker_view("http://10.9.9.9:8000", self.deployment)
        self.dispatcher = Dispatcher(
            fleet=StaticFleet([worker]), publisher=QueuePublisher(interval_s=0.2)
        )
        self.lease = await self.dispatcher.acquire(self.deployment)
        for _ in range(waiting):
            self.waiters.append(
                asyncio.ensure_future(self.dispatcher.acquire(self.deployment, timeout_s=300))
            )
        await asyncio.sleep(0.05)
        assert self.dispatcher.queue_length(self.deployment) == waiting

    async def _drain(self) -> None:
        for waiter in self.waiters:
            waiter.cancel()
        await asyncio.gather(*self.waiters, return_exceptions=True)
        self.dispatcher.release(self.lease)

    def close(self) -> None:
        self._call(self._drain())
        # The publisher deletes this process's field once the queue is empty.
        publisher = self.dispatcher.publisher
        assert publisher is not None
        mine = field(self.deployment, publisher.process)
        wait_until(
            lambda: mine not in sync_redis().hkeys(QUEUE_KEY),
            5,
            "the emptied queue to be unpublished",
        )
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


def publish_snapshot(workers: list[Worker], now: float, running: float, waiting: float) -> None:
    client = sync_redis()
    client.delete(SNAPSHOT_KEY)
    for w in workers:
        view = worker_view(
            w.url,
            w.deployment.name,
            max_in_flight=w.deployment.max_in_flight_per_worker,
            running=running,
            waiting=waiting,
            scraped_at=now,
        )
        view = replace(view, id=w.pk, labels=w.labels)
        client.hset(SNAPSHOT_KEY, str(w.pk), view.to_json())


# 2. A replica is always the deployment's own kind of worker


class RecordedPopen:
    """Stands in for subprocess.Popen in the local actuator: records the command line the
    actuator built, starts nothing (the test is about which worker would run)."""

    commands: list[list[str]] = []

    def __init__(self, command: list[str], **_: Any) -> None:
        RecordedPopen.commands.append(list(command))
        self.pid = 999_999

    def poll(self) -> None:
        return None

    def terminate(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> int:
        return 0


@pytest.fixture
def recorded_popen(monkeypatch: pytest.MonkeyPatch) -> type[RecordedPopen]:
    from scaling.autoscale.actuators import local

    RecordedPopen.commands = []
    fake = SimpleNamespace(
        Popen=RecordedPopen, STDOUT=subprocess.STDOUT, TimeoutExpired=subprocess.TimeoutExpired
    )
    monkeypatch.setattr(local, "subprocess", fake)
    return RecordedPopen


@pytest.fixture
def prepared_model(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A BASE_DIR whose embedded model counts as prepared (the command names its folder)."""
    folder = tmp_path / "base" / "var" / "models" / EMBEDDED_MODEL
    folder.mkdir(parents=True)
    (folder / ".prepared").touch()
    settings.BASE_DIR = tmp_path / "base"
    settings.VAR_DIR = tmp_path / "var"
    monkeypatch.setenv("SLUICE_WORKER_DEVICE", "cpu")  # no nvidia-smi probe
    return folder


@pytest.mark.unit
@pytest.mark.django_db
def test_the_local_actuator_starts_the_deployments_own_kind_of_worker(prepared_model):
    actuator = LocalProcessActuator(sim_profile="a10g-llama3-8b")
    real = fleet.ensure_deployment(EMBEDDED_MODEL)
    assert real.worker_kind == "vllm"  # the default: a deployment is a real model
    command = actuator.command(real, 8123)
    assert command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert command[command.index("--model") + 1] == str(prepared_model)
    assert "inference.sim" not in command

    sim = fleet.ensure_deployment("sim-chat", worker_kind="simulated")
    command = actuator.command(sim, 8124)
    assert command[1:3] == ["-m", "inference.sim"]
    assert command[command.index("--profile") + 1] == "a10g-llama3-8b"

    # Where no vLLM may run, a vLLM deployment gets an error, never a simulator instead.
    with pytest.raises(ActuatorError, match="a simulator is never started in its place"):
        LocalProcessActuator(vllm=False).command(real, 8125)
    other = fleet.ensure_deployment("llama3-8b")
    with pytest.raises(ActuatorError, match="only for the embedded model"):
        actuator.command(other, 8126)


@pytest.mark.live
@pytest.mark.django_db
def test_enabling_a_policy_for_the_real_model_never_starts_a_simulator(
    settings, monkeypatch, prepared_model, recorded_popen
):
    """What the issue feared: saving the Tuning form enables a policy for the real model,
    and the loop (configured as `manage.py autoscale` was, to start simulators) adds one."""
    settings.AUTOSCALE_LOCAL_WORKER = "sim"  # the old knob, set: it is not read any more
    monkeypatch.setenv("AUTOSCALE_LOCAL_WORKER", "sim")
    real = fleet.ensure_deployment(EMBEDDED_MODEL, max_in_flight_per_worker=16)
    actions.change_autoscale_policy(None, real, {"enabled": True, "max_replicas": 2})
    loop = AutoscaleLoop(actuator_from_settings("local"), sync_redis())
    rows = loop.tick()
    assert rows and rows[0].action == "up" and rows[0].actuated, rows
    (command,) = recorded_popen.commands
    assert command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert command[command.index("--served-model-name") + 1] == EMBEDDED_MODEL
    assert not any("inference.sim" in part for part in command)
    (worker,) = Worker.objects.filter(deployment=real)
    assert worker.labels["worker"] == "vllm" and worker.state == "starting"

    # A host that runs no vLLM (make run with SLUICE_EMBEDDED_WORKER=0) starts nothing at
    # all, and says so once, not every tick.
    worker.delete()
    recorded_popen.commands.clear()
    monkeypatch.setenv("AUTOSCALE_LOCAL_VLLM", "0")
    loop.actuator = actuator_from_settings("local")
    for k in range(3):
        loop.tick(time.time() + 15 * k)
    assert recorded_popen.commands == [] and not Worker.objects.filter(deployment=real).exists()
    failed = ScalingDecision.objects.filter(deployment=real, actuated=False, action="up")
    assert failed.count() == 1 and "never started in its place" in failed.get().error


@pytest.mark.live
@pytest.mark.django_db
def test_a_simulated_deployment_gets_simulator_replicas(settings, tmp_path, recorded_popen):
    settings.VAR_DIR = tmp_path
    sim = fleet.ensure_deployment("sim-chat", worker_kind="simulated")
    AutoscalePolicy.objects.create(deployment=sim, min_replicas=2, max_replicas=2)
    AutoscaleLoop(LocalProcessActuator(sim_profile="h100-llama3-8b"), sync_redis()).tick()
    assert len(recorded_popen.commands) == 2
    assert all(c[1:3] == ["-m", "inference.sim"] for c in recorded_popen.commands)
    assert {w.labels["worker"] for w in Worker.objects.filter(deployment=sim)} == {"simulated"}


# 3. The gateway's dispatch queue, published, is the autoscaler's queue signal


@pytest.mark.live
def test_each_process_publishes_its_queue_and_readers_sum_fresh_entries_only():
    first = QueuedRequests("chat", waiting=3)
    try:
        second = QueuedRequests("chat", waiting=2)  # a second gateway process
        try:
            wait_until(
                lambda: read_depths(sync_redis()) == {"chat": 5},
                5,
                "both processes' queues to be published and summed",
            )
            # A process that died with a queue stops counting: its entry goes stale.
            client = sync_redis()
            client.hset(QUEUE_KEY, field("chat", "dead-host:1:ab"), f"7 {time.time() - 30}")
            assert read_depths(client) == {"chat": 5}
            assert field("chat", "dead-host:1:ab") not in client.hkeys(QUEUE_KEY)  # cleaned
        finally:
            second.close()
        assert read_depths(sync_redis()) == {"chat": 3}
    finally:
        first.close()
    assert read_depths(sync_redis()) == {}


@pytest.fixture
def chat() -> ModelDeployment:
    deployment = fleet.ensure_deployment("chat", max_in_flight_per_worker=10)
    AutoscalePolicy.objects.create(
        deployment=deployment,
        mode="reactive",
        min_replicas=1,
        max_replicas=4,
        scale_up_queue=2,
    )
    fleet.register_worker(deployment, "http://10.0.0.1:8000", "autoscaler", state="ready")
    return deployment


class StartsNothing(LocalProcessActuator):
    """Registers a replica as the local actuator would, without a process."""

    def start_replica(self, deployment, *, warm=False, spot=False):
        url = f"http://10.0.1.{Worker.objects.count()}:8000"
        fleet.register_worker(deployment, url, "autoscaler", state="warm" if warm else "starting")
        return SimpleNamespace(key=url, url=url, alive=True)

    def reconcile(self, deployment):
        pass


@pytest.mark.live
@pytest.mark.django_db
def test_the_published_queue_scales_up_when_the_workers_report_no_waiting(chat):
    """vLLM's own waiting count is zero (the dispatcher holds every worker at its target);
    the requests waiting in the gateway are what the queue rule sees."""
    workers = list(Worker.objects.filter(deployment=chat))
    loop = AutoscaleLoop(StartsNothing(), sync_redis())
    queued = QueuedRequests("chat", waiting=5)
    try:
        wait_until(lambda: read_depths(sync_redis()).get("chat") == 5, 5, "the queue published")
        start = time.time()
        for k in range(5):  # 60 s of ticks: the scale-up window
            now = start + 15 * k
            publish_snapshot(workers, now, running=5, waiting=0)  # utilisation 0.5: in band
            loop.tick(now)
    finally:
        queued.close()
    up = ScalingDecision.objects.get(deployment=chat, action="up")
    assert up.rule == "sustained_up" and up.actuated
    assert "queue 5 (5 in the gateway) > 2 for 60 s" in up.reason
    assert up.inputs["sample"]["gateway_queue"] == 5 and up.inputs["sample"]["queue"] == 5
    assert Worker.objects.filter(deployment=chat, state="starting").count() == 1

    # The same load without the gateway's queue is within band: nothing else moved it.
    ScalingDecision.objects.all().delete()
    Worker.objects.filter(deployment=chat, state="starting").delete()
    sync_redis().delete("sluice:autoscale:chat:samples")
    for k in range(5):
        now = start + 1000 + 15 * k
        publish_snapshot(workers, now, running=5, waiting=0)
        loop.tick(now)
    assert not ScalingDecision.objects.filter(deployment=chat, action="up").exists()


@pytest.fixture
def two_slot_platform(redis_url: str) -> Iterator[dict[str, Any]]:
    """A live gateway over one simulator whose requests take about 2 s, with 2 slots."""
    sim = SimProcess(model="sim-upstream", fixed_ttft_ms=100, fixed_itl_ms=100)
    try:
        yield from live_platform(
            redis_url, sim, requests_per_minute=600, max_in_flight_per_worker=2
        )
    finally:
        sim.stop()


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_the_gateways_own_dispatcher_publishes_and_metrics_sum_it(two_slot_platform):
    """A real gateway process over a worker with 2 slots: what it queues beyond them shows
    in Redis, in /metrics' sluice_queue_depth, and on the fleet and overview pages."""
    client = two_slot_platform["client"]

    def slow_request(_: int) -> None:
        client.chat.completions.create(
            model="small-model", messages=MESSAGES, max_tokens=20, stream=False
        )

    def published() -> dict[str, int]:
        depths = read_depths(sync_redis())
        return depths if depths.get("small-model", 0) >= 3 else {}

    with ThreadPoolExecutor(6) as pool:
        running = [pool.submit(slow_request, n) for n in range(6)]
        depths = wait_until(published, 10, "the gateway's queue to be published", poll_s=0.05)
        assert depths["small-model"] <= 4  # 6 sent, 2 slots
        metrics = Client().get("/metrics").content.decode()
        assert 'sluice_queue_depth{deployment="small-model"}' in metrics
        staff = Client()
        staff.force_login(tuning_staff())
        fleet_page = staff.get(reverse("dashboard:fleet")).content.decode()
        assert 'id="queues"' in fleet_page and "small-model" in fleet_page
        overview = staff.get(reverse("dashboard:overview")).content.decode()
        assert 'id="gateway-queue"' in overview
        for done in running:
            done.result(timeout=60)
    wait_until(
        lambda: "small-model" not in read_depths(sync_redis()),
        5,
        "the drained queue to be unpublished",
    )


# 4. The scraper promotes a replica to serving only once it is healthy


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_starting_replica_is_ready_only_in_a_scrape_that_finds_it_healthy():
    deployment = fleet.ensure_deployment("sim", max_in_flight_per_worker=8)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    fleet.register_worker(deployment, url, registered_by="autoscaler")  # starting
    seen: list[tuple[str, bool]] = []

    async def scrape(scraper: Scraper) -> WorkerView:
        async with aiohttp.ClientSession() as session:
            (view,) = await scraper.scrape_once(session)
        seen.append((view.state, view.healthy))
        return view

    async def scenario() -> None:
        scraper = Scraper()
        view = await scrape(scraper)  # loading: nothing answers yet
        assert (view.state, view.healthy) == ("starting", False)
        sim = await sync_to_async(SimProcess)(model="sim", port=port)
        try:
            view = await scrape(scraper)  # its first good check: healthy and ready together
            assert (view.state, view.healthy) == ("ready", True)
            assert await sync_to_async(lambda: Worker.objects.get(url=url).state)() == "ready"
            assert [w.url for w in await FleetView().routable("sim")] == [url]
        finally:
            await sync_to_async(sim.stop)()
        for _ in range(3):  # once in rotation, it takes two failed checks to leave
            await scrape(scraper)
        await sync_to_async(connections.close_all)()  # the thread's, before the test DB goes

    asyncio.run(scenario())
    assert ("ready", False) in seen[-2:]  # out of rotation by health, as before
    assert ("ready", False) not in seen[:3]  # never in rotation before it was healthy


# 1 and 5. The loop's heartbeat and counters: the Tuning page and /metrics


@pytest.mark.live
@pytest.mark.django_db
def test_the_tuning_page_says_whether_the_loop_runs_and_what_the_policy_does(chat):
    staff = Client()
    staff.force_login(tuning_staff())
    page = staff.get(reverse("dashboard:tuning"), {"deployment": chat.pk}).content.decode()
    assert "The autoscaler loop is not running" in page
    assert "keeps 1 to 4 serving replicas of chat" in page
    assert "vLLM servers" in page and "never simulators" in page

    loop = AutoscaleLoop(StartsNothing(), sync_redis(), tick_s=15)
    publish_snapshot(list(Worker.objects.filter(deployment=chat)), time.time(), 1, 0)
    loop.tick()
    AutoscalePolicy.objects.filter(deployment=chat).update(min_replicas=3)
    page = staff.get(reverse("dashboard:tuning"), {"deployment": chat.pk}).content.decode()
    assert "The autoscaler loop is running (local actuator" in page
    assert "every 15 s, 1 enabled policy" in page
    assert "At its next tick it starts 2 replica(s)." in page

    loop.stop()  # the command's exit: the heartbeat goes with the lease
    assert sync_redis().get(HEARTBEAT_KEY) is None
    AutoscalePolicy.objects.filter(deployment=chat).update(enabled=False)
    page = staff.get(reverse("dashboard:tuning"), {"deployment": chat.pk}).content.decode()
    assert "The autoscaler loop is not running" in page and "Disabled: the loop leaves" in page


@pytest.mark.live
@pytest.mark.django_db
def test_metrics_count_the_loops_ticks_and_decisions(chat):
    loop = AutoscaleLoop(StartsNothing(), sync_redis())
    workers = list(Worker.objects.filter(deployment=chat))
    start = time.time()
    for k in range(3):  # three in-band ticks: one hold recorded, three counted
        publish_snapshot(workers, start + 15 * k, running=5, waiting=0)
        loop.tick(start + 15 * k)
    assert ScalingDecision.objects.filter(deployment=chat).count() == 1
    stats = read_stats(sync_redis())
    assert stats.ticks == 3 and stats.decisions == {("chat", "hold"): 3}
    metrics = Client().get("/metrics").content.decode()
    assert "sluice_autoscaler_ticks_total 3.0" in metrics
    assert 'sluice_autoscaler_decisions_total{action="hold",deployment="chat"} 3.0' in metrics
    assert "# TYPE sluice_queue_depth gauge" in metrics


# 1. The embedded deployment ships with a policy that fits one CPU worker


@pytest.mark.live  # setup_demo issues an API key, which touches Redis
@pytest.mark.django_db
def test_the_demo_deployment_ships_an_enabled_policy_for_one_worker_and_keeps_edits():
    call_command("setup_demo", "--json", stdout=io.StringIO())
    policy = AutoscalePolicy.objects.get(deployment__name=EMBEDDED_MODEL)
    assert (policy.enabled, policy.min_replicas, policy.max_replicas) == (True, 1, 1)
    assert policy.deployment.worker_kind == "vllm"
    AutoscalePolicy.objects.filter(pk=policy.pk).update(max_replicas=3)
    call_command("setup_demo", "--json", stdout=io.StringIO())  # a restart keeps the edit
    assert AutoscalePolicy.objects.get(pk=policy.pk).max_replicas == 3


@pytest.mark.live
@pytest.mark.django_db
def test_one_worker_at_its_bounds_holds_with_reasons():
    """The demo's shape: one worker that no actuator started, min 1 and max 1. Idle for the
    scale-down window, then saturated for the scale-up window: it holds, and says why."""
    deployment = fleet.ensure_deployment(EMBEDDED_MODEL, max_in_flight_per_worker=16)
    AutoscalePolicy.objects.create(
        deployment=deployment, mode="reactive", min_replicas=1, max_replicas=1
    )
    fleet.register_worker(deployment, "http://127.0.0.1:9", registered_by="settings", state="ready")
    workers = list(Worker.objects.filter(deployment=deployment))
    loop = AutoscaleLoop(StartsNothing(), sync_redis())
    start = time.time()
    for k in range(62):
        publish_snapshot(workers, start + 15 * k, running=0, waiting=0)
        loop.tick(start + 15 * k)
    for k in range(62, 68):
        publish_snapshot(workers, start + 15 * k, running=16, waiting=4)
        loop.tick(start + 15 * k)
    rules = list(
        ScalingDecision.objects.filter(deployment=deployment)
        .order_by("at")
        .values_list("action", "rule")
    )
    assert {action for action, _ in rules} == {"hold"}
    assert [rule for _, rule in rules][:1] == ["within_band"]
    assert ("hold", "at_min") in rules and ("hold", "at_max") in rules
    assert Worker.objects.filter(deployment=deployment).count() == 1


@pytest.mark.live
@pytest.mark.django_db
def test_the_command_counts_configured_workers_before_its_first_tick(settings, recorded_popen):
    """`make run` starts the scraper (which registers SLUICE_WORKERS) and the loop together:
    a first tick before the scraper's must not see the embedded deployment empty and start
    a second vLLM beside the launcher's own."""
    url = "http://127.0.0.1:9"
    settings.SLUICE_WORKERS = f"{EMBEDDED_MODEL}@{url},other@http://127.0.0.1:10"
    other = fleet.ensure_deployment("other")
    fleet.register_worker(other, "http://127.0.0.1:10", "settings", state="ready")
    demo = fleet.ensure_deployment(EMBEDDED_MODEL)
    AutoscalePolicy.objects.create(deployment=demo, min_replicas=1, max_replicas=1)
    out = io.StringIO()
    call_command("autoscale", "--once", "--actuator", "local", stdout=out)
    assert recorded_popen.commands == []
    assert f"{EMBEDDED_MODEL}: hold 1->1" in out.getvalue()
    assert Worker.objects.get(url=url).registered_by == "settings"
    assert Worker.objects.get(url="http://127.0.0.1:10").state == "ready"  # known: untouched
