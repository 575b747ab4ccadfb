"""The live trace replay: real simulator processes, the real loop and scraper, real requests."""

import io
import json
import os
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from scaling.autoscale.types import PolicySpec
from scaling.models import ScalingDecision
from scaling.replay.live.clock import TimeScale
from scaling.replay.live.load import arrivals, fit_rate_scale, window
from scaling.replay.live.options import LiveOptions
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
    from inference.models import Worker

    assert (
        not Worker.objects.filter(deployment__name="replay-live-reactive")
        .exclude(state="dead")
        .exists()
    )
