"""The live trace replay: real simulator processes, the real loop and scraper, real requests."""

import io
import json
import os
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from inference.models import ModelDeployment, Worker
from scaling.autoscale.record import policy_spec
from scaling.autoscale.types import PolicySpec
from scaling.management.commands.replay import Command as ReplayCommand
from scaling.models import AutoscalePolicy, ScalingDecision
from scaling.replay.live.clock import TimeScale
from scaling.replay.live.load import arrivals, fit_rate_scale, window
from scaling.replay.live.options import LiveOptions
from scaling.replay.live.pools import parse_pools, pool_policy
from scaling.replay.live.processes import ReplayActuator, ReplicaLife
from scaling.replay.live.replay import policy_row
from scaling.replay.traces import load_trace

STEP_TRACE: list[dict[str, object]] = [
    {"trace": "step", "ttft_target_s": 1.0},
    {"at": 0, "duration": 60, "rps": 2.0, "prompt_tokens": 64, "output_tokens": 16},
    {"at": 60, "duration": 240, "rps": 14.0, "prompt_tokens": 64, "output_tokens": 16},
]


def write_trace(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.unit
def test_time_scale_divides_the_policy_clock_and_says_what_it_did():
    scale = TimeScale(30)
    scaled = scale.policy(PolicySpec())
    assert (scaled.scale_up_window_s, scaled.scale_down_window_s) == (2, 30)
    assert (scaled.scale_up_cooldown_s, scaled.scale_down_cooldown_s) == (2, 10)
    assert scaled.startup_time_s == 6 and scale.tick_s == 0.5
    assert scale.scrape_s == 0.1 and TimeScale(5).scrape_s == 0.2  # 1 s / speed, floored
    assert scale.forecaster().trend_windows_s == (10.0, 30.0)
    assert scaled.scale_up_utilisation == 0.8 and scaled.ttft_p99_target_s == 2.0  # not time
    # whole seconds, at least one: at speed 120 a 60 s window is 1 s, i.e. 120 trace s
    assert TimeScale(120).policy(PolicySpec()).scale_up_window_s == 1
    assert "up window 60->1 s (= 120 trace s)" in TimeScale(120).describe(PolicySpec())
    assert TimeScale(120).tick_s == 0.25  # floored


@pytest.mark.unit
def test_arrivals_follow_the_scaled_rate_and_are_reproducible(tmp_path):
    demand = window(load_trace(write_trace(tmp_path / "step.jsonl", STEP_TRACE)), 0, None)
    times = arrivals(demand, rate_scale=1.0, speed=10, lead_in_s=60, seed=3)
    assert (times == arrivals(demand, 1.0, 10, 60, 3)).all()
    assert times[0] < 0 and times[-1] < 30  # the lead-in is before 0; 300 trace s = 30 s
    measured = times[times >= 0]
    low, high = measured[measured < 6], measured[measured >= 6]
    assert 4 <= len(low) <= 24 and 280 <= len(high) <= 400  # 2 req/s x 6 s, 14 x 24
    policy = PolicySpec(max_replicas=4, slots_per_replica=8)
    rate_scale = fit_rate_scale(demand, policy, LiveOptions())
    assert rate_scale * 14 == pytest.approx(0.9 * 3 * 8 * 0.7 / LiveOptions().service_s)


@pytest.mark.unit
def test_window_and_live_options_are_checked(tmp_path):
    trace = write_trace(tmp_path / "step.jsonl", STEP_TRACE)
    demand = load_trace(trace)
    assert window(demand, 60, 120).rate == [14.0] * 120
    with pytest.raises(ValueError, match="no seconds"):
        window(demand, 400, None)
    with pytest.raises(CommandError, match="oracle needs the future"):
        call_command("replay", str(trace), "--live", "--modes", "oracle")
    with pytest.raises(CommandError, match="at most 16"):
        call_command("replay", str(trace), "--live", "--max-replicas", "40")


@pytest.mark.unit
def test_warm_pool_variants_differ_from_the_policy_only_in_the_warm_pool():
    base = PolicySpec(mode="reactive", max_replicas=4, startup_time_s=600, warm_pool=0)
    cold, warm, asleep = (pool_policy(base, pool, 2) for pool in ("cold", "warm", "asleep"))
    assert (cold.warm_pool, cold.warm_sleeps) == (0, False)
    assert (warm.warm_pool, warm.warm_sleeps) == (2, False)
    assert (asleep.warm_pool, asleep.warm_sleeps) == (2, True)
    assert asleep == PolicySpec(
        mode="reactive", max_replicas=4, startup_time_s=600, warm_pool=2, warm_sleeps=True
    )
    with pytest.raises(ValueError, match="at least one replica"):
        pool_policy(base, "asleep", 0)
    assert parse_pools("cold, asleep") == ["cold", "asleep"]
    for bad, error in [("cold,hot", "unknown warm pool"), ("warm,warm", "twice"), (",", "none")]:
        with pytest.raises(ValueError, match=error):
            parse_pools(bad)


@pytest.mark.unit
def test_a_sleeping_pool_reaches_the_loops_policy_row_and_wakes_in_the_scaled_time():
    """The row the replay stores is what the loop reads back (policy_spec): the sleeping
    warm pool and every scaled duration survive the round trip, and each replica's
    simulator answers /wake_up after the trace's wake time / speed."""
    scale = TimeScale(30)
    scaled = scale.policy(pool_policy(PolicySpec(mode="reactive", max_replicas=4), "asleep", 1))
    row = policy_row(scaled)
    assert row["enabled"] is False  # no other autoscaler sharing the database acts on it
    assert row["warm_pool_sleeps"] is True and row["warm_pool"] == 1
    deployment = ModelDeployment(name="replay-live-reactive-asleep", max_in_flight_per_worker=64)
    assert policy_spec(AutoscalePolicy(deployment=deployment, **row)) == scaled

    actuator = ReplayActuator(LiveOptions(speed=30, wake_time_s=10))
    simulated = ModelDeployment(name="d", worker_kind=ModelDeployment.WorkerKind.SIMULATED)
    command = actuator.command(simulated, 4321)
    assert float(command[command.index("--wake-s") + 1]) == pytest.approx(10 / 30)
    assert float(command[command.index("--wake-s") + 1]) < scaled.startup_time_s


@pytest.mark.unit
def test_only_the_spells_in_sleep_mode_inside_the_window_count_as_asleep():
    life = ReplicaLife(url="u", pid=1, started=0.0, warm=True, initial=True)
    life.fell_asleep(5.0)
    life.fell_asleep(6.0)  # already asleep: one spell
    life.woke(8.0)
    life.woke(9.0)  # already awake: nothing
    life.fell_asleep(20.0)  # open until the stop, or the window's end
    assert life.asleep == [(5.0, 8.0), (20.0, None)]
    assert life.asleep_within(0.0, 30.0) == pytest.approx(3.0 + 10.0)
    assert life.asleep_within(6.0, 25.0) == pytest.approx(2.0 + 5.0)
    life.stopped = 22.0
    assert life.asleep_within(0.0, 30.0) == pytest.approx(3.0 + 2.0)


@pytest.mark.unit
def test_pools_run_each_controller_once_per_variant_and_refuse_what_cannot_run(tmp_path):
    trace = write_trace(tmp_path / "step.jsonl", STEP_TRACE)
    policy = PolicySpec(max_replicas=4, warm_pool=0)
    options = {"pools": "cold,asleep", "warm_pool_sleeps": False, "wake_time": 10.0}
    runs = ReplayCommand()._runs(policy, ["reactive", "predictive"], options)
    assert [(label, run.mode, run.warm_pool, run.warm_sleeps) for label, run in runs] == [
        ("cold", "reactive", 0, False),
        ("asleep", "reactive", 1, True),  # a pool of one when --warm-pool gives none
        ("cold", "predictive", 0, False),
        ("asleep", "predictive", 1, True),
    ]
    for args, error in [
        (["--pools", "cold,hot"], "unknown warm pool"),
        (["--warm-pool-sleeps"], "needs a warm pool"),
        (["--warm-pool", "1", "--warm-pool-sleeps", "--pools", "cold"], "drop --warm-pool"),
        (["--wake-time", "-1"], "must not be negative"),
    ]:
        with pytest.raises(CommandError, match=error):
            call_command("replay", str(trace), "--live", *args)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_live_replay_scales_up_real_processes_and_accounts_for_every_request(settings, tmp_path):
    """300 trace seconds at speed 10 (30 s of wall time): 2 req/s, then 14 req/s, which
    one replica with 4 slots (250 ms + 16 x 15 ms per request: 8.2 req/s) cannot carry."""
    settings.VAR_DIR = tmp_path
    trace = write_trace(tmp_path / "step.jsonl", STEP_TRACE)
    out = io.StringIO()
    call_command(
        "replay",
        str(trace),
        "--live",
        "--modes",
        "reactive",
        "--speed",
        "10",
        "--rate-scale",
        "1",
        "--slots",
        "4",
        "--max-replicas",
        "3",
        "--startup-time",
        "20",
        "--lead-in",
        "0",
        "--json",
        "--redis-url",
        settings.REDIS_URL,
        stdout=out,
    )
    live, *models = json.loads(out.getvalue())
    assert live["live"] and live["controller"] == "reactive"
    assert [(m["controller"], m["live"]) for m in models] == [
        ("oracle (model)", False),
        ("reactive (model)", False),
    ]

    # every request sent in the window was measured: a first token or a named error
    assert live["sent"] == live["measured"] == live["requests"] > 250
    assert "cancelled" not in live["errors"]
    assert 0 <= live["attainment"] <= 1 and live["ttft_p50_s"] > 0.2  # the worker's 250 ms

    # the loop scaled up through the local actuator, for a reason it recorded
    ups = [d for d in live["decisions"] if d["action"] == "up" and d["actuated"]]
    assert ups and live["ups"] == len(live["events"]) - live["downs"] >= 1
    assert ups[0]["rule"] == "sustained_up" and "utilisation" in ups[0]["reason"]
    rows = ScalingDecision.objects.filter(
        deployment__name="replay-live-reactive", action="up", actuated=True
    )
    assert rows.count() == len(ups) and all(row.reason for row in rows)

    # a process the loop started became ready through the scraper, and was billed
    started = [r for r in live["replicas"] if not r["initial"]]
    assert started and started[0]["ready_after_s"] is not None
    assert started[0]["ready_after_s"] >= 2.0  # held for the scaled start-up (20 s / 10)
    assert live["peak_serving"] >= 2 and live["replica_seconds"] > 30
    assert live["gpu_hours"] == pytest.approx(live["replica_seconds"] * 10 / 3600)
    assert live["cost"] == pytest.approx(live["gpu_hours"] * 4.0)

    # nothing is left running
    assert live["replicas"] and not [r["pid"] for r in live["replicas"] if _alive(r["pid"])]
    assert (
        not Worker.objects.filter(deployment__name="replay-live-reactive")
        .exclude(state="dead")
        .exists()
    )


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_live_replay_wakes_a_sleeping_warm_replica_before_any_cold_start(settings, tmp_path):
    """The step trace with a warm pool of one in sleep mode: the loop puts the pool to
    sleep, the step wakes it (1 s: 10 trace s at speed 10, against a 6 s cold start), and
    GPU-hours count the replica asleep while awake-h do not."""
    settings.VAR_DIR = tmp_path
    trace = write_trace(tmp_path / "step.jsonl", STEP_TRACE)
    out = io.StringIO()
    call_command(
        "replay",
        str(trace),
        "--live",
        "--modes",
        "reactive",
        "--pools",
        "asleep",
        "--wake-time",
        "10",
        "--speed",
        "10",
        "--rate-scale",
        "1",
        "--slots",
        "4",
        "--max-replicas",
        "3",
        "--startup-time",
        "60",
        "--lead-in",
        "0",
        "--json",
        "--redis-url",
        settings.REDIS_URL,
        stdout=out,
    )
    live, *models = json.loads(out.getvalue())
    assert live["pool"] == "asleep" and live["controller"] == "reactive"
    assert [m["controller"] for m in models] == ["oracle (model)"]  # the model cannot sleep
    name = "replay-live-reactive-asleep"
    assert AutoscalePolicy.objects.get(deployment__name=name).warm_pool_sleeps

    # the pool slept, and the first step up woke it before starting anything
    first_up = next(d for d in live["decisions"] if d["action"] == "up" and d["actuated"])
    assert "(wake [" in first_up["reason"] and "woke" in first_up["reason"]
    assert live["wakes_s"] and min(live["wakes_s"]) >= 0.9  # the scaled wake time, 1 s
    assert max(live["wakes_s"]) < 6.0  # the scaled cold start
    assert live["sent"] == live["measured"] == live["requests"] > 250

    # asleep is billed (the process keeps its GPU) and reported apart
    assert 0 < live["asleep_seconds"] < live["replica_seconds"]
    assert live["gpu_hours"] == pytest.approx(live["replica_seconds"] * 10 / 3600)
    awake = (live["replica_seconds"] - live["asleep_seconds"]) * 10 / 3600
    assert live["awake_gpu_hours"] == pytest.approx(awake) and awake < live["gpu_hours"]

    assert not [r["pid"] for r in live["replicas"] if _alive(r["pid"])]
    assert not Worker.objects.filter(deployment__name=name).exclude(state="dead").exists()
