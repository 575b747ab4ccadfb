"""Batches for a deployment scaled to zero: the runner finds no replica, so its meter
publishes a waiting line (the autoscaler's `from_zero` signal), withdraws it once a worker
is routable, and the batch runs on the replica that signal brought. Before, such a batch
waited for spare capacity that never came, and its lines expired after the window."""

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from foundation.redis_clients import sync_redis
from inference import fleet
from inference.models import Worker
from scaling.autoscale.actuators.local import LocalProcessActuator
from scaling.autoscale.loop import AutoscaleLoop
from scaling.models import AutoscalePolicy
from scaling.routing.batch_meter import BatchMeter
from scaling.routing.queue_depth import read_depths
from tests.batch_stack import Stack, chat_line
from tests.test_batch_meter import worker
from tests.test_fleet import StaticFleet
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]


def test_a_meter_finding_no_replica_of_a_deployment_scaled_to_zero_asks_for_one() -> None:
    cold = fleet.ensure_deployment("cold-model", served_model_name="sim-upstream")
    AutoscalePolicy.objects.create(deployment=cold, min_replicas=0, max_replicas=1)
    fleet.ensure_deployment("fixed-model", served_model_name="sim-upstream")  # no policy
    fleet_now = StaticFleet([])
    meter = BatchMeter(fleet_now)

    async def scenario() -> list[dict[str, int]]:
        seen = []
        assert not await meter.may_start("cold-model")
        assert not await meter.may_start("fixed-model")  # nothing would come for it
        seen.append(read_depths(sync_redis()))
        fleet_now._workers = [replace(worker("http://a", 4, running=0), deployment="cold-model")]
        assert await meter.may_start("cold-model")  # a replica: the spare meters it now
        seen.append(read_depths(sync_redis()))
        fleet_now._workers = []  # scaled to zero again, then the runner ends
        assert not await meter.may_start("cold-model")
        seen.append(read_depths(sync_redis()))
        await meter.close()
        seen.append(read_depths(sync_redis()))
        return seen

    asking, served, asking_again, closed = asyncio.run(scenario())
    assert asking == {"cold-model": 1}
    assert served == {}
    assert asking_again == {"cold-model": 1}
    assert closed == {}


def test_a_batch_for_a_deployment_scaled_to_zero_wakes_a_replica_and_completes(
    stack: Stack, settings: Any, tmp_path: Path
) -> None:
    """End to end: the Celery worker's runner asks, the autoscale loop's from_zero rule
    starts a replica (the local actuator, a simulator process), the gateway's scraper puts
    it in rotation, and every line is answered by it."""
    settings.VAR_DIR = tmp_path
    deployment = fleet.ensure_deployment("sim-zero", worker_kind="simulated")
    AutoscalePolicy.objects.create(
        deployment=deployment, mode="reactive", min_replicas=0, max_replicas=1
    )
    actuator = LocalProcessActuator(sim_profile="h100-llama3-8b")
    loop = AutoscaleLoop(actuator, sync_redis())
    try:
        stack.start_worker()
        batch_id = stack.submit(
            [chat_line(f"line-{n}", f"hello {n}", "sim-zero") for n in range(3)]
        )

        def started() -> Any:
            decisions = loop.tick() or []
            return next((d for d in decisions if d.action == "up" and d.actuated), None)

        up = wait_until(started, 30, "the loop to start a replica for the batch", poll_s=0.5)
        assert up.rule == "from_zero", up.reason
        batch = stack.wait_for(batch_id, {"completed", "failed", "expired"}, timeout_s=90)
        assert batch.status == "completed", batch
        answers = stack.read(batch.output_file_id)
        assert sorted(a["custom_id"] for a in answers) == ["line-0", "line-1", "line-2"]
        assert all(a["response"]["status_code"] == 200 for a in answers), answers
        (replica,) = Worker.objects.filter(deployment=deployment).exclude(state="dead")
        assert replica.url in actuator.processes
        # The runner withdrew its waiting line when the batch ended.
        assert read_depths(sync_redis()).get("sim-zero", 0) == 0
    finally:
        actuator.stop_all()
