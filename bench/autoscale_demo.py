"""The autoscaling demo's fleet (`manage.py autoscale_demo`): a simulated deployment with a
predictive policy on short clocks, its API key, the load profile, and the clean-up.

Everything here touches one deployment, `demo-fleet`, and the demo team's keys named
KEY_NAME: the embedded deployment, other deployments and other teams are never read for
writing. A `demo-fleet` that exists with another worker kind is refused rather than
converted: someone else made it, and the autoscaler would start simulators beside it.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction

from gateway.accounts import actions
from gateway.accounts.management.commands.setup_demo import EXAMPLE_GPU_RATE, EXAMPLE_PRICES
from gateway.accounts.models import ApiKey, Team
from inference import fleet
from inference.models import ModelDeployment, Worker
from scaling.autoscale.actuators.local import REGISTERED_BY, LocalProcessActuator
from scaling.models import AutoscalePolicy, ScalingDecision

DEPLOYMENT = "demo-fleet"
KEY_NAME = "autoscale demo key"
# Three requests in flight per replica: with the simulator's default profile (an H100
# serving Llama-3-8B, about 11 ms a token) a 64-token reply takes about 0.75 s, so one
# replica saturates at about 4 req/s and a few req/s show the fleet growing, at a request
# rate this 2-core host and the demo team's 600 requests a minute both allow.
SLOTS_PER_REPLICA = 3
# The example prices setup_demo gives the embedded deployment, and the example H100 rate
# (what the simulator plays) as the GPU cost; marked as examples, as setup_demo's are.
DEPLOYMENT_FIELDS: dict[str, Any] = {
    "worker_kind": ModelDeployment.WorkerKind.SIMULATED,
    "max_in_flight_per_worker": SLOTS_PER_REPLICA,
    "routing_policy": ModelDeployment.RoutingPolicy.LEAST_LOADED,
    "price_input_per_million": EXAMPLE_PRICES["price_input_per_million"],
    "price_output_per_million": EXAMPLE_PRICES["price_output_per_million"],
    "gpu_cost_per_hour": EXAMPLE_GPU_RATE["on_demand_per_hour"],
    "prices_are_examples": True,
}
# Production clocks (a 60 s up window, 15 minutes of quiet before a step down) would make
# a newcomer wait a quarter of an hour to see one of each; these act within a tick or two.
POLICY_FIELDS: dict[str, Any] = {
    "enabled": True,
    "mode": AutoscalePolicy.Mode.PREDICTIVE,
    "min_replicas": 1,
    "max_replicas": 4,
    "warm_pool": 0,
    "warm_pool_sleeps": False,
    "target_utilisation": 0.7,
    "scale_up_utilisation": 0.8,
    "scale_down_utilisation": 0.3,
    "scale_up_queue": 2 * SLOTS_PER_REPLICA,
    "ttft_p99_target_s": 2.0,
    "scale_up_window_s": 30,
    "scale_up_cooldown_s": 30,
    "scale_down_window_s": 120,
    "scale_down_cooldown_s": 60,
    # As if a replica took a minute to load: predictive mode looks that far ahead.
    "startup_time_s": 60,
    "allow_spot": False,
}
# Two minutes of ramp, then a minute of spike, at the default 30 s a level.
DEFAULT_RATES = (1.0, 2.0, 3.0, 4.0, 8.0, 8.0)
DEFAULT_DURATION_S = 30.0


class DemoError(Exception):
    """The demo cannot go on; the message says what to do."""


@dataclass(frozen=True)
class Level:
    rate: float  # arrivals per second (open loop)
    phase: str  # "ramp" or "spike"


def load_profile(rates: Sequence[float]) -> list[Level]:
    """The levels, each named ramp or spike. The spike begins at the level with the largest
    rise over the one before, if that rise is at least twice every other rise (a jump, not
    one more step of the ramp), and lasts to the end."""
    rises = [b - a for a, b in zip([0.0, *rates], rates, strict=False)]
    spike_at = len(rates)
    if len(rates) > 1:
        biggest = max(range(1, len(rates)), key=lambda i: rises[i])
        others = [r for i, r in enumerate(rises) if i != biggest]
        if rises[biggest] > 0 and all(rises[biggest] >= 2 * r for r in others):
            spike_at = biggest
    return [Level(rate, "spike" if i >= spike_at else "ramp") for i, rate in enumerate(rates)]


def demo_team() -> Team:
    team = Team.objects.filter(name=settings.DEMO_TEAM_NAME).first()
    if team is None:
        raise DemoError(
            f"no team named {settings.DEMO_TEAM_NAME!r}: start the platform with `make run` "
            "(it creates the demo team), with the same SLUICE_VAR_DIR and DATABASE_URL as here"
        )
    return team


@transaction.atomic
def ensure_fleet() -> tuple[ModelDeployment, AutoscalePolicy]:
    """The demo deployment and its policy, created or put back to the demo's values (so a
    rerun after --cleanup, or after an edit in the admin, behaves as documented). Prices
    an operator set on it are kept."""
    deployment, created = ModelDeployment.objects.get_or_create(
        name=DEPLOYMENT, defaults=DEPLOYMENT_FIELDS
    )
    if deployment.worker_kind != ModelDeployment.WorkerKind.SIMULATED:
        raise DemoError(
            f"a deployment named {DEPLOYMENT!r} already exists with worker_kind "
            f"{deployment.worker_kind!r}; the demo only runs on a simulated one and leaves "
            "it alone: rename or delete it in the admin"
        )
    if not created and deployment.max_in_flight_per_worker != SLOTS_PER_REPLICA:
        deployment.max_in_flight_per_worker = SLOTS_PER_REPLICA
        deployment.save(update_fields=["max_in_flight_per_worker"])
    policy, _ = AutoscalePolicy.objects.get_or_create(deployment=deployment, defaults=POLICY_FIELDS)
    for field, value in POLICY_FIELDS.items():
        setattr(policy, field, value)
    policy.full_clean()
    policy.save()
    return deployment, policy


def issue_key(team: Team) -> actions.IssuedKey:
    """A fresh key for the demo, allowed only the demo deployment. Keys are stored hashed,
    so an earlier one cannot be shown again: the earlier demo keys are revoked instead."""
    for old in ApiKey.objects.filter(team=team, name=KEY_NAME, revoked_at=None):
        actions.revoke_api_key(old)
    return actions.issue_api_key(
        team,
        name=KEY_NAME,
        scopes=(ApiKey.Scope.INFERENCE,),
        allowed_models=(DEPLOYMENT,),
    )


def live_workers(deployment: ModelDeployment) -> list[Worker]:
    return list(Worker.objects.filter(deployment=deployment).exclude(state=Worker.State.DEAD))


def replica_counts(deployment: ModelDeployment) -> dict[str, int]:
    counts: dict[str, int] = {}
    for worker in live_workers(deployment):
        counts[worker.state] = counts.get(worker.state, 0) + 1
    return counts


def cost_per_hour(deployment: ModelDeployment, counts: dict[str, int]) -> Decimal:
    """What the serving and loading replicas cost per hour at the deployment's GPU rate
    (the simulator's replicas carry no gpu label, so that is the rate the fleet page uses)."""
    held = sum(n for state, n in counts.items() if state != Worker.State.DEAD)
    return deployment.gpu_cost_per_hour * held


def decisions_since(deployment: ModelDeployment, since: datetime) -> list[ScalingDecision]:
    return list(ScalingDecision.objects.filter(deployment=deployment, at__gte=since).order_by("at"))


def ours(worker: Worker) -> bool:
    """A replica the local actuator started (it can stop those, by pid, safely)."""
    actuator = worker.labels.get("actuator") if isinstance(worker.labels, dict) else None
    return worker.registered_by == REGISTERED_BY and actuator == LocalProcessActuator.name


@dataclass(frozen=True)
class Cleanup:
    stopped: list[str]
    still_busy: list[str]  # draining, not idle yet: run --cleanup again
    not_ours: list[str]  # registered by someone else (admin, settings): left alone


def cleanup(
    idle: Callable[[Worker, float], bool],
    wait_s: float = 30.0,
    actuator: LocalProcessActuator | None = None,
) -> Cleanup:
    """Disable the demo policy (so the loop stops starting replicas for it), drain the demo
    replicas the local actuator started, and stop each once idle(worker, drained_at) says a
    scrape after the drain saw nothing running or waiting on it: as the loop does, a
    request in flight is never cut off."""
    deployment = ModelDeployment.objects.filter(name=DEPLOYMENT).first()
    if deployment is None:
        return Cleanup([], [], [])
    AutoscalePolicy.objects.filter(deployment=deployment).update(enabled=False)
    workers = live_workers(deployment)
    mine = [w for w in workers if ours(w)]
    drained_at = time.time()
    for worker in mine:
        fleet.set_worker_state(worker, Worker.State.DRAINING, "autoscale_demo --cleanup")
    actuator = actuator or LocalProcessActuator()
    stopped: list[str] = []
    deadline = time.monotonic() + wait_s
    while True:
        for worker in [w for w in mine if w.url not in stopped and idle(w, drained_at)]:
            actuator.stop_replica(worker)
            stopped.append(worker.url)
        if len(stopped) == len(mine) or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    return Cleanup(
        stopped=stopped,
        still_busy=[w.url for w in mine if w.url not in stopped],
        not_ours=[w.url for w in workers if not ours(w)],
    )
