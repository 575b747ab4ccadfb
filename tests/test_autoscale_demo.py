"""`manage.py autoscale_demo` (bench/autoscale_demo.py): what it sets up, what it leaves
alone, what --cleanup does, and the load it drives. Driving real load at a running
platform is checked by hand (docs/autoscaling.md, "Watch it scale")."""

import re
from decimal import Decimal
from pathlib import Path

import pytest
from django.forms.models import model_to_dict

from bench import autoscale_demo as demo
from gateway.accounts import actions
from gateway.accounts.models import ApiKey
from inference.models import ModelDeployment, Worker
from scaling.models import AutoscalePolicy

DOCS = Path(__file__).resolve().parent.parent / "docs" / "autoscaling.md"


def _other_deployment() -> tuple[ModelDeployment, AutoscalePolicy, Worker]:
    other = ModelDeployment.objects.create(
        name="smollm2-135m-instruct", max_in_flight_per_worker=16
    )
    policy = AutoscalePolicy.objects.create(deployment=other, min_replicas=1, max_replicas=1)
    worker = Worker.objects.create(
        deployment=other,
        url="http://127.0.0.1:9",
        state=Worker.State.READY,
        registered_by="autoscaler",
        labels={"actuator": "local", "pid": 2**22 + 7, "port": 9},
    )
    return other, policy, worker


def _replica(deployment: ModelDeployment, port: int, by: str = "autoscaler") -> Worker:
    # A pid no process has (above the kernel's pid_max default): stopping it signals nothing.
    labels = {"actuator": "local", "pid": 2**22 + port, "port": port} if by == "autoscaler" else {}
    return Worker.objects.create(
        deployment=deployment,
        url=f"http://127.0.0.1:{port}",
        state=Worker.State.READY,
        registered_by=by,
        labels=labels,
    )


@pytest.mark.unit
@pytest.mark.django_db
def test_setup_makes_a_simulated_deployment_with_an_enabled_predictive_policy_on_short_clocks():
    deployment, policy = demo.ensure_fleet()
    assert deployment.name == "demo-fleet"
    assert deployment.worker_kind == ModelDeployment.WorkerKind.SIMULATED
    assert deployment.max_in_flight_per_worker == 3
    assert deployment.prices_are_examples and deployment.gpu_cost_per_hour == Decimal("2.50")
    assert (policy.enabled, policy.mode) == (True, AutoscalePolicy.Mode.PREDICTIVE)
    assert (policy.min_replicas, policy.max_replicas) == (1, 4)
    # A step up within a minute or two of the load, at the loop's 15 s tick.
    assert policy.scale_up_window_s + policy.scale_up_cooldown_s <= 60
    assert policy.scale_down_window_s <= 120
    policy.full_clean()  # thresholds the admin would accept


@pytest.mark.unit
@pytest.mark.django_db
def test_setup_again_changes_nothing_and_puts_back_the_demo_values_but_keeps_prices():
    first, policy = demo.ensure_fleet()
    demo.ensure_fleet()
    assert ModelDeployment.objects.filter(name="demo-fleet").count() == 1
    assert AutoscalePolicy.objects.filter(deployment=first).count() == 1
    AutoscalePolicy.objects.filter(pk=policy.pk).update(enabled=False, max_replicas=8)
    ModelDeployment.objects.filter(pk=first.pk).update(
        max_in_flight_per_worker=64, gpu_cost_per_hour=Decimal("9.00")
    )
    deployment, policy = demo.ensure_fleet()
    assert deployment.pk == first.pk
    assert (policy.enabled, policy.max_replicas) == (True, 4)
    assert deployment.max_in_flight_per_worker == 3
    assert deployment.gpu_cost_per_hour == Decimal("9.00")  # an operator's price stays


@pytest.mark.unit
@pytest.mark.django_db
def test_setup_and_cleanup_never_touch_another_deployment():
    other, policy, worker = _other_deployment()
    before = [model_to_dict(row) for row in (other, policy, worker)]
    demo.ensure_fleet()
    demo.cleanup(lambda w, t: True, wait_s=0)
    after = [model_to_dict(type(row).objects.get(pk=row.pk)) for row in (other, policy, worker)]
    assert after == before


@pytest.mark.unit
@pytest.mark.django_db
def test_a_demo_fleet_of_another_worker_kind_is_refused_and_left_alone():
    ModelDeployment.objects.create(name="demo-fleet", worker_kind="vllm")
    with pytest.raises(demo.DemoError, match="worker_kind 'vllm'"):
        demo.ensure_fleet()
    assert ModelDeployment.objects.get(name="demo-fleet").worker_kind == "vllm"
    assert not AutoscalePolicy.objects.filter(deployment__name="demo-fleet").exists()


@pytest.mark.unit
@pytest.mark.django_db
def test_cleanup_disables_the_policy_and_stops_only_idle_replicas_the_autoscaler_started():
    deployment, policy = demo.ensure_fleet()
    idle = _replica(deployment, 20001)
    busy = _replica(deployment, 20002)
    admin = _replica(deployment, 20003, by="admin")
    done = demo.cleanup(lambda w, drained_at: w.pk == idle.pk, wait_s=0)
    assert not AutoscalePolicy.objects.get(pk=policy.pk).enabled
    assert done.stopped == [idle.url] and done.still_busy == [busy.url]
    assert done.not_ours == [admin.url]
    states = {w.url: w.state for w in Worker.objects.filter(deployment=deployment)}
    # The busy one stays draining (out of rotation) until a later --cleanup finds it idle.
    assert states == {idle.url: "dead", busy.url: "draining", admin.url: "ready"}


@pytest.mark.unit
@pytest.mark.django_db
def test_cleanup_without_a_demo_fleet_does_nothing():
    assert demo.cleanup(lambda w, t: True, wait_s=0) == demo.Cleanup([], [], [])
    assert not ModelDeployment.objects.exists()


@pytest.mark.unit
def test_the_default_load_is_a_rising_ramp_then_a_spike_at_twice_its_top():
    levels = demo.load_profile(demo.DEFAULT_RATES)
    ramp = [lv.rate for lv in levels if lv.phase == "ramp"]
    spike = [lv.rate for lv in levels if lv.phase == "spike"]
    assert [lv.phase for lv in levels] == ["ramp"] * len(ramp) + ["spike"] * len(spike)
    assert ramp == sorted(ramp) and len(set(ramp)) == len(ramp) >= 3
    assert spike and min(spike) >= 2 * max(ramp)
    # Within the demo team's 600 requests a minute, with room for a person's own requests.
    assert max(spike) * 60 <= 500


@pytest.mark.unit
def test_only_a_jump_is_called_a_spike():
    assert {lv.phase for lv in demo.load_profile([1, 2, 3, 4])} == {"ramp"}
    assert {lv.phase for lv in demo.load_profile([5, 5, 5])} == {"ramp"}
    assert [lv.phase for lv in demo.load_profile([1, 2, 6, 6])] == [
        "ramp",
        "ramp",
        "spike",
        "spike",
    ]


@pytest.mark.unit
def test_the_docs_state_the_default_load_and_policy():
    section = DOCS.read_text().split("## Watch it scale", 1)[1].split("\n## ", 1)[0]
    rates = ",".join(f"{r:g}" for r in demo.DEFAULT_RATES)
    assert f"`{rates}`" in section
    assert f"{demo.DEFAULT_DURATION_S:g} s" in section
    for field in ("max_replicas", "scale_up_window_s", "startup_time_s", "scale_down_window_s"):
        assert re.search(rf"`{field}` {demo.POLICY_FIELDS[field]}\b", section), field


@pytest.mark.live
@pytest.mark.django_db
def test_each_run_issues_a_fresh_key_for_the_demo_fleet_only_and_revokes_the_last():
    team = actions.create_team("demo")
    first = demo.issue_key(team)
    second = demo.issue_key(team)
    keys = {k.lookup_id: k for k in ApiKey.objects.filter(team=team, name=demo.KEY_NAME)}
    assert keys[first.key.lookup_id].revoked_at is not None
    fresh = keys[second.key.lookup_id]
    assert fresh.revoked_at is None and fresh.allowed_models == ["demo-fleet"]
    assert fresh.scopes == [ApiKey.Scope.INFERENCE]
    assert second.plaintext not in repr(model_to_dict(fresh))  # stored hashed only
