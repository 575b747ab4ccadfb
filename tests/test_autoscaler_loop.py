"""The live autoscaler: leader lease, recorded decisions, actuators, commands."""

import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core.management import call_command

from foundation.embedded_redis import free_port
from foundation.redis_clients import sync_redis
from inference import fleet
from inference.models import ModelDeployment, Worker
from inference.snapshot import SNAPSHOT_KEY, WorkerView
from scaling.autoscale.actuators import Actuator, Replica
from scaling.autoscale.loop import AutoscaleLoop, LeaderLock
from scaling.autoscale.types import Decision, FleetState
from scaling.models import AutoscalePolicy, ScalingDecision
from tests.waiting import wait_until, wait_until_answers

pytestmark = pytest.mark.django_db


class FakeActuator(Actuator):
    """Registers workers as a real actuator would, and remembers what it was asked."""

    name = "fake"

    def __init__(self) -> None:
        self.started: list[tuple[str, bool]] = []
        self.stopped: list[str] = []

    def start_replica(self, deployment, *, warm=False, spot=False):
        url = f"http://10.0.0.{len(self.started) + 100}:8000"
        self.started.append((url, warm))
        fleet.register_worker(
            deployment, url, registered_by="autoscaler", state="warm" if warm else "starting"
        )
        return Replica(key=url, url=url, alive=True)

    def stop_replica(self, worker):
        self.stopped.append(worker.url)
        fleet.set_worker_state(worker, Worker.State.DEAD, "stopped")

    def list_replicas(self, deployment):
        return []

    def reconcile(self, deployment):
        pass


def publish(workers: list[Worker], running: float, now: float, waiting: float = 0) -> None:
    """Write the fleet snapshot the scraper would have written."""
    views = {
        str(w.pk): WorkerView(
            id=w.pk,
            url=w.url,
            deployment=w.deployment.name,
            upstream_model=w.deployment.name,
            state=w.state,
            max_in_flight=w.deployment.max_in_flight_per_worker,
            labels=w.labels,
            healthy=True,
            running=running,
            waiting=waiting,
            kv_usage=0.1,
            prefix_hit_rate=None,
            ttft_p50_s=0.1,
            ttft_p99_s=0.3,
            scraped_at=now,
            error="",
        ).to_json()
        for w in workers
    }
    client = sync_redis()
    client.delete(SNAPSHOT_KEY)
    for key, value in views.items():
        client.hset(SNAPSHOT_KEY, key, value)


@pytest.fixture
def deployment():
    deployment = fleet.ensure_deployment("chat", max_in_flight_per_worker=10)
    AutoscalePolicy.objects.create(
        deployment=deployment, mode="reactive", min_replicas=1, max_replicas=6, warm_pool=1
    )
    for port in (1, 2):
        fleet.register_worker(deployment, f"http://10.0.0.{port}:8000", "autoscaler", state="ready")
    return deployment


def live(deployment: ModelDeployment) -> list[Worker]:
    return list(Worker.objects.filter(deployment=deployment).exclude(state="dead"))


@pytest.mark.live
def test_only_the_lease_holder_acts_and_a_lapsed_lease_passes_on():
    client = sync_redis()
    first, second = LeaderLock(client, ttl_s=0.3), LeaderLock(client, ttl_s=0.3)
    assert first.acquire() and not second.acquire()
    assert first.acquire()  # renewing our own lease
    time.sleep(0.4)  # the first leader stalls past its lease (the stall is what is tested)
    assert second.acquire() and not first.held() and not first.acquire()
    first.release()  # releasing someone else's lease does nothing
    assert second.held()


@pytest.mark.live
def test_two_loops_one_acts(deployment):
    a, b = FakeActuator(), FakeActuator()
    loop_a, loop_b = AutoscaleLoop(a, sync_redis()), AutoscaleLoop(b, sync_redis())
    now = time.time()
    publish(live(deployment), running=5, now=now)
    assert loop_a.tick(now) is not None
    assert loop_b.tick(now) is None  # standby: it neither decides nor records
    assert a.started == [("http://10.0.0.100:8000", True)] and b.started == []  # warm pool
    loop_a.lock.release()
    assert loop_b.tick(now + 15) is not None


@pytest.mark.live
def test_sustained_load_scales_up_and_every_decision_is_recorded_with_its_reason(deployment):
    actuator = FakeActuator()
    loop = AutoscaleLoop(actuator, sync_redis())
    start = time.time()
    for k in range(6):  # 75 s of 95% batch occupancy, one tick every 15 s
        now = start + 15 * k
        publish(live(deployment), running=9.5, now=now)
        loop.tick(now)
    rows = list(ScalingDecision.objects.filter(deployment=deployment).order_by("at"))
    assert [r.action for r in rows] == ["warm", "up", "hold"]
    warm, up, hold = rows
    assert "start 1 for the warm pool" in warm.reason and warm.actuated
    assert warm.rule == "within_band"  # and the within-band holds after it are not repeated
    assert hold.rule == "up_cooldown"
    assert up.rule == "sustained_up" and "utilisation 0.95 > 0.80 for 60 s" in up.reason
    assert up.from_replicas == 2 and up.to_replicas == 3 and up.actuated
    assert up.inputs["sample"]["utilisation"] == 0.95 and up.inputs["ops"]["promote"]
    promoted = Worker.objects.get(url="http://10.0.0.100:8000")
    assert promoted.state == "ready"  # the warm replica went into rotation at once
    assert actuator.started[-1] == ("http://10.0.0.101:8000", True)  # and was replaced


@pytest.mark.live
def test_no_action_on_stale_metrics(deployment):
    loop = AutoscaleLoop(FakeActuator(), sync_redis())
    now = time.time()
    publish(live(deployment), running=0, now=now - 60)  # the scraper stopped a minute ago
    rows = loop.tick(now)
    assert rows and rows[0].rule == "stale_metrics" and "scrape_workers" in rows[0].reason
    assert not rows[0].actuated and len(live(deployment)) == 2


@pytest.mark.live
@pytest.mark.parametrize("released", [False, True], ids=["taken", "taken and released"])
def test_a_leader_that_lost_its_lease_while_acting_stops_no_more_replicas(deployment, released):
    """A scale-down's stops can outlast the lease: it is renewed before each one, and a
    leader that lost it stops acting, also when the process that took it has let it go
    (its decision was made on a view that other leader may have acted on)."""

    class TakenOver(FakeActuator):
        def stop_replica(self, worker):
            super().stop_replica(worker)
            client = sync_redis()
            client.set(loop.lock.key, "another-process", px=30_000)  # it expired, taken
            if released:
                client.delete(loop.lock.key)

    actuator = TakenOver()
    loop = AutoscaleLoop(actuator, sync_redis(), tick_s=1.0)
    assert loop.lock.acquire()
    workers = {w.pk: w for w in live(deployment)}
    decision = Decision("down", "test", 2, 0, "test", stop=tuple(workers))
    _, error = loop.actuate(deployment, decision, workers, FleetState())
    assert len(actuator.stopped) == 1 and "lease" in error


@pytest.mark.live
def test_scale_down_drains_first_and_stops_only_once_idle(deployment):
    AutoscalePolicy.objects.filter(deployment=deployment).update(warm_pool=0)
    actuator = FakeActuator()
    loop = AutoscaleLoop(actuator, sync_redis())
    start = time.time()
    for k in range(62):  # 15 quiet minutes and a bit
        publish(live(deployment), running=1, now=start + 15 * k)
        loop.tick(start + 15 * k)
    draining = Worker.objects.get(deployment=deployment, state="draining")
    assert actuator.stopped == []
    # still one stream on it: never stopped
    publish(live(deployment), running=1, now=start + 15 * 62)
    loop.tick(start + 15 * 62)
    assert actuator.stopped == []
    publish(live(deployment), running=0, now=start + 15 * 63)
    loop.tick(start + 15 * 63)
    assert actuator.stopped == [draining.url]
    assert ScalingDecision.objects.filter(action="drain", actuated=True).exists()


@pytest.mark.live
def test_local_actuator_starts_registers_and_stops_a_simulator(settings, tmp_path):
    from scaling.autoscale.actuators.local import LocalProcessActuator

    settings.VAR_DIR = tmp_path
    deployment = fleet.ensure_deployment("sim-chat", worker_kind="simulated")
    actuator = LocalProcessActuator(sim_profile="h100-llama3-8b")
    replica = actuator.start_replica(deployment, warm=True)
    try:
        worker = Worker.objects.get(url=replica.url)
        assert worker.state == "warm" and worker.labels["actuator"] == "local"
        assert worker.labels["worker"] == "simulated"
        wait_until_answers(f"{replica.url}/health", 15, "the simulator")
        assert [r.alive for r in actuator.list_replicas(deployment)] == [True]
    finally:
        actuator.stop_replica(Worker.objects.get(url=replica.url))
    assert Worker.objects.get(url=replica.url).state == "dead"
    assert actuator.list_replicas(deployment) == []


class FakeKubernetes(BaseHTTPRequestHandler):
    """Answers the three calls the actuator makes, as the API server would."""

    replicas = 2
    pods: list[dict[str, Any]] = []
    calls: list[tuple[str, str, str, dict[str, Any]]] = []

    def _reply(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        FakeKubernetes.calls.append(("GET", self.path, "", {}))
        if "/pods" in self.path:
            return self._reply(
                {
                    "apiVersion": "v1",
                    "kind": "PodList",
                    "metadata": {},
                    "items": FakeKubernetes.pods,
                }
            )
        self._reply(
            {
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "metadata": {"name": "vllm-chat", "namespace": "sluice"},
                "spec": {"replicas": FakeKubernetes.replicas},
            }
        )

    def do_PATCH(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeKubernetes.calls.append(("PATCH", self.path, self.headers["Content-Type"], body))
        if "spec" in body:
            FakeKubernetes.replicas = body["spec"]["replicas"]
            return self.do_GET()
        self._reply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})

    def do_POST(self) -> None:
        """A pod's vLLM in sleep mode: POST /sleep?level=1 and /wake_up."""
        FakeKubernetes.calls.append(("POST", self.path, "", {}))
        self._reply({"status": "awake"} if self.path == "/wake_up" else {})

    def log_message(self, *args) -> None:
        pass


@pytest.mark.unit
def test_kubernetes_actuator_patches_the_scale_subresource():
    """The official client's real request building, against a local stand-in server."""
    from kubernetes import client  # type: ignore[import-untyped]

    from scaling.autoscale.actuators.kubernetes import KubernetesActuator

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), FakeKubernetes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    FakeKubernetes.calls, FakeKubernetes.replicas, FakeKubernetes.pods = [], 2, []
    try:
        config = client.Configuration(host=f"http://127.0.0.1:{server.server_port}")
        actuator = KubernetesActuator(namespace="sluice", api_client=client.ApiClient(config))
        deployment = fleet.ensure_deployment("chat")
        actuator.start_replica(deployment, warm=True)
        scale = "/apis/apps/v1/namespaces/sluice/deployments/vllm-chat/scale"
        assert FakeKubernetes.calls[:2] == [
            ("GET", scale, "", {}),
            ("PATCH", scale, "application/strategic-merge-patch+json", {"spec": {"replicas": 3}}),
        ]
        FakeKubernetes.pods = [
            {
                "metadata": {
                    "name": "vllm-chat-abc12",
                    "labels": {"sluice.io/deployment": "vllm-chat", "sluice.io/pool": "on-demand"},
                },
                "status": {
                    "podIP": "10.1.2.3",
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        ]
        actuator.reconcile(deployment)  # the new pod becomes a worker, held warm as asked
        pods_call = FakeKubernetes.calls[-1][1]
        assert pods_call.startswith("/api/v1/namespaces/sluice/pods?labelSelector=")
        worker = Worker.objects.get(url="http://10.1.2.3:8000")
        assert worker.state == "warm" and worker.labels["pod"] == "vllm-chat-abc12"
        FakeKubernetes.calls = []
        actuator.stop_replica(worker)
        pod_patch, scale_patch = FakeKubernetes.calls[0], FakeKubernetes.calls[2]
        assert pod_patch[1] == "/api/v1/namespaces/sluice/pods/vllm-chat-abc12"
        assert pod_patch[3] == {
            "metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-1000"}}
        }
        assert scale_patch[3] == {"spec": {"replicas": 2}}
        assert Worker.objects.get(pk=worker.pk).state == "dead"
    finally:
        server.shutdown()


@pytest.mark.unit
def test_kubernetes_actuator_sleeps_and_wakes_a_pod_annotated_for_sleep_mode():
    """A pod whose vLLM runs with sleep mode (the GPU overlay annotates it) is registered
    able to sleep, and sleep and wake are POSTs to that pod's own URL, as the loop makes
    them for a local replica; a pod without the annotation is registered unable to sleep
    (decide() then keeps it awake: tests/test_sleep_mode.py)."""
    from kubernetes import client

    from scaling.autoscale.actuators.kubernetes import SLEEP_ANNOTATION, KubernetesActuator

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), FakeKubernetes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    FakeKubernetes.calls, FakeKubernetes.replicas = [], 2
    labels = {"sluice.io/deployment": "vllm-chat", "sluice.io/pool": "on-demand"}
    FakeKubernetes.pods = [
        {
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            # The pod's vLLM is this same stand-in server: its IP and the actuator's port.
            "status": {"podIP": "127.0.0.1" if sleeps else "10.1.2.4"},
        }
        for name, sleeps, annotations in [
            ("vllm-chat-gpu01", True, {SLEEP_ANNOTATION: "true"}),
            ("vllm-chat-old02", False, {}),
        ]
    ]
    try:
        config = client.Configuration(host=f"http://127.0.0.1:{server.server_port}")
        actuator = KubernetesActuator(
            namespace="sluice", port=server.server_port, api_client=client.ApiClient(config)
        )
        deployment = fleet.ensure_deployment("chat")
        actuator.reconcile(deployment)
        gpu = Worker.objects.get(labels__pod="vllm-chat-gpu01")
        assert gpu.url == f"http://127.0.0.1:{server.server_port}"
        assert gpu.labels["sleep_mode"] is True
        assert Worker.objects.get(labels__pod="vllm-chat-old02").labels["sleep_mode"] is False
        FakeKubernetes.calls = []
        actuator.sleep_replica(gpu)
        took = actuator.wake_replica(gpu)
        assert [call[:2] for call in FakeKubernetes.calls] == [
            ("POST", "/sleep?level=1"),
            ("POST", "/wake_up"),
        ]
        assert took >= 0
    finally:
        server.shutdown()


@pytest.mark.live
def test_autoscale_command_runs_one_tick():
    out = io.StringIO()
    call_command("autoscale", "--once", "--actuator", "local", stdout=out)
    assert "autoscaler: local actuator" in out.getvalue()


@pytest.mark.live
def test_replay_command_reports_slo_gpu_hours_and_events():
    out = io.StringIO()
    call_command("replay", "steady", "--modes", "oracle,predictive", "--events", "2", stdout=out)
    report = out.getvalue()
    assert "in SLO" in report and "x oracle" in report
    assert "predictive" in report and "100.00%" in report


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_end_to_end_local_replicas_start_get_scraped_and_the_warm_one_stays_out(settings, tmp_path):
    """Loop + local actuator + the real scraper, with simulator processes."""
    import asyncio

    import aiohttp

    from inference.scraper import Scraper
    from scaling.autoscale.actuators.local import LocalProcessActuator

    settings.VAR_DIR = tmp_path
    deployment = fleet.ensure_deployment(
        "sim-chat", max_in_flight_per_worker=8, worker_kind="simulated"
    )
    AutoscalePolicy.objects.create(deployment=deployment, min_replicas=1, warm_pool=1)
    actuator = LocalProcessActuator()
    loop = AutoscaleLoop(actuator, sync_redis())

    async def scrape() -> None:
        async with aiohttp.ClientSession() as session:
            await Scraper().scrape_once(session)

    try:
        first = loop.tick()
        assert first and first[0].action == "up" and first[0].rule == "min_replicas"
        assert sorted(w.state for w in live(deployment)) == ["starting", "warm"]

        def scraped_ready() -> bool:
            asyncio.run(scrape())
            return Worker.objects.filter(deployment=deployment, state="ready").exists()

        wait_until(scraped_ready, 20, "the started replica to be scraped ready", poll_s=0.2)
        assert sorted(w.state for w in live(deployment)) == ["ready", "warm"]
        asyncio.run(scrape())
        rows = loop.tick()
        assert rows is not None and all(r.action == "hold" for r in rows)
    finally:
        actuator.stop_all()
    assert live(deployment) == []


@pytest.mark.unit
def test_admin_edits_policies_and_shows_decisions_read_only(deployment):
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.create_superuser("root", password="pw-not-used-1234")
    staff = Client()
    staff.force_login(user)
    policy = AutoscalePolicy.objects.get(deployment=deployment)
    assert staff.get("/admin/scaling/autoscalepolicy/").status_code == 200
    page = staff.get(f"/admin/scaling/autoscalepolicy/{policy.pk}/change/")
    assert page.status_code == 200 and b"scale_down_window_s" in page.content
    ScalingDecision.objects.create(
        deployment=deployment,
        action="up",
        rule="sustained_up",
        from_replicas=2,
        to_replicas=3,
        reason="because",
    )
    assert staff.get("/admin/scaling/scalingdecision/").status_code == 200
    assert staff.get("/admin/scaling/scalingdecision/add/").status_code == 403


@pytest.mark.live
def test_one_deployment_failing_its_tick_does_not_hold_the_others(deployment):
    """An actuator (or a worker's figures) raising for one deployment skipped every
    deployment after it in the tick, until it stopped failing."""
    broken = fleet.ensure_deployment("broken", max_in_flight_per_worker=10)
    AutoscalePolicy.objects.create(deployment=broken, mode="reactive", min_replicas=1)

    class FailsForOne(FakeActuator):
        def reconcile(self, deployment):
            if deployment.name == "broken":
                raise RuntimeError("the cluster API answered something unreadable")

    loop = AutoscaleLoop(FailsForOne(), sync_redis())
    now = time.time()
    publish(live(deployment), running=0, now=now)
    rows = loop.tick(now) or []
    assert [row.deployment.name for row in rows] == ["chat"]


@pytest.mark.live
def test_a_replica_asked_for_and_not_yet_registered_is_not_asked_for_again(deployment):
    """A pod waiting minutes for a GPU node has no worker yet: counted as starting, not
    started again at every tick (before, 15 s ticks went far past max_replicas)."""
    AutoscalePolicy.objects.filter(deployment=deployment).update(min_replicas=3, warm_pool=0)

    class PodsPending(FakeActuator):
        coming = 1

        def replicas_on_their_way(self, deployment):
            return self.coming

    actuator = PodsPending()
    loop = AutoscaleLoop(actuator, sync_redis())
    now = time.time()
    for k in range(3):  # 2 ready + 1 on its way = min_replicas: nothing to start
        publish(live(deployment), running=1, now=now + 15 * k)
        loop.tick(now + 15 * k)
    assert actuator.started == []
    actuator.coming = 0  # the pod was lost: the bound asks for it again
    publish(live(deployment), running=1, now=now + 45)
    loop.tick(now + 45)
    assert len(actuator.started) == 1


@pytest.mark.unit
def test_the_kubernetes_actuator_counts_pods_without_an_address_as_on_their_way():
    from kubernetes import client

    from scaling.autoscale.actuators.kubernetes import KubernetesActuator

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), FakeKubernetes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    running = {"podIP": "10.1.2.3", "conditions": [{"type": "Ready", "status": "True"}]}
    FakeKubernetes.calls, FakeKubernetes.replicas = [], 3
    FakeKubernetes.pods = [
        {"metadata": {"name": "vllm-chat-a", "labels": {}}, "status": running},
        {"metadata": {"name": "vllm-chat-b", "labels": {}}, "status": {"phase": "Pending"}},
    ]
    try:
        config = client.Configuration(host=f"http://127.0.0.1:{server.server_port}")
        actuator = KubernetesActuator(namespace="sluice", api_client=client.ApiClient(config))
        deployment = fleet.ensure_deployment("chat")
        # 3 asked for: one pod has an address, one is Pending, one is not made yet.
        assert actuator.replicas_on_their_way(deployment) == 2
    finally:
        server.shutdown()
