"""The autoscaler's decisions (pure), its forecast, and its behaviour over simulated time."""

import itertools
import random
from dataclasses import replace

import pytest
from django.core.exceptions import ValidationError
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.models import ModelDeployment
from scaling.autoscale.decide import decide
from scaling.autoscale.forecast import Forecaster, bucket_start, level_and_trend
from scaling.autoscale.pool import drained
from scaling.autoscale.types import (
    DRAINING,
    READY,
    STARTING,
    WARM,
    FleetState,
    LastActions,
    PolicySpec,
    Sample,
    WorkerState,
)
from scaling.models import AutoscalePolicy
from scaling.replay.analytical_fleet import FleetModel
from scaling.replay.simulated import AutoscalerController, replay
from scaling.replay.traces import Demand, load_trace, trace_path

pytestmark = pytest.mark.unit

NOW = 1_000_000.0
POLICY = PolicySpec(
    min_replicas=1,
    max_replicas=20,
    slots_per_replica=10,
    mode="reactive",
    scale_up_window_s=60,
    scale_down_window_s=900,
    scale_up_cooldown_s=60,
    scale_down_cooldown_s=300,
    ttft_p99_target_s=1.0,
)


def fleet(
    ready: int = 3, starting: int = 0, warm: int = 0, draining: int = 0, in_flight: float = 5.0
) -> FleetState:
    ids = itertools.count(1)
    workers = [WorkerState(id=next(ids), state=READY, in_flight=in_flight) for _ in range(ready)]
    workers += [WorkerState(id=next(ids), state=STARTING, healthy=False) for _ in range(starting)]
    workers += [WorkerState(id=next(ids), state=WARM, since=NOW - 500) for _ in range(warm)]
    workers += [
        WorkerState(id=next(ids), state=DRAINING, in_flight=2, since=NOW - 10, observed_at=NOW)
        for _ in range(draining)
    ]
    return FleetState(workers=tuple(workers))


def history(
    utilisation: float,
    seconds: float,
    serving: int = 3,
    tick: float = 15,
    queue: float = 0,
    ttft: float | None = None,
) -> list[Sample]:
    """Samples every tick for the last `seconds`, ending at NOW, all at this utilisation."""
    count = int(seconds // tick) + 1
    demand = utilisation * serving * POLICY.slots_per_replica
    return [
        Sample(
            at=NOW - (count - 1 - i) * tick,
            utilisation=utilisation,
            queue=queue,
            demand=demand + queue,
            ttft_p99_s=ttft,
            serving=serving,
        )
        for i in range(count)
    ]


# sustained windows, cooldowns, clamps


def test_scale_up_needs_the_condition_for_the_whole_window():
    short = decide(POLICY, history(0.95, 45), fleet(), NOW, LastActions())
    assert short.action == "hold" and short.rule == "within_band"
    held = decide(POLICY, history(0.95, 60), fleet(), NOW, LastActions())
    assert held.action == "up" and held.rule == "sustained_up"
    assert "utilisation 0.95 > 0.80 for 60 s" in held.reason
    assert held.to_replicas == 5  # 28.5 in flight at 0.7 x 10 slots -> 5 replicas
    broken = history(0.95, 120)
    broken[-3] = replace(broken[-3], utilisation=0.5)  # one dip restarts the window
    assert decide(POLICY, broken, fleet(), NOW, LastActions()).action == "hold"


@pytest.mark.parametrize(
    ("queue", "ttft", "signal"),
    [(1500, None, "queue 1500 > 1000"), (0, 2.5, "P99 TTFT 2.50 s > 1.00 s")],
)
def test_queue_and_ttft_also_scale_up_when_sustained(queue, ttft, signal):
    decision = decide(POLICY, history(0.5, 60, queue=queue, ttft=ttft), fleet(), NOW, LastActions())
    assert decision.action == "up" and signal in decision.reason


def test_scale_down_needs_fifteen_quiet_minutes_and_is_sized_by_the_window_peak():
    assert decide(POLICY, history(0.1, 885), fleet(ready=6), NOW, LastActions()).action == "hold"
    samples = history(0.1, 900, serving=6)
    decision = decide(POLICY, samples, fleet(ready=6), NOW, LastActions())
    assert decision.action == "down" and decision.rule == "sustained_down"
    assert decision.to_replicas == 1 and len(decision.drain) == 5  # 6 in flight -> 1 replica
    assert not decision.stop  # drained first, stopped on a later tick


def test_cooldowns_hold_back_repeated_steps():
    up = decide(POLICY, history(0.95, 60), fleet(), NOW, LastActions(up_at=NOW - 30))
    assert up.action == "hold" and up.rule == "up_cooldown" and "30 s" in up.reason
    quiet = history(0.1, 900, serving=6)
    recent_down = LastActions(down_at=NOW - 100)
    down = decide(POLICY, quiet, fleet(ready=6), NOW, recent_down)
    assert down.action == "hold" and down.rule == "down_cooldown"
    # the quiet window must come after the last step up, however long ago the cooldown
    after_up = decide(POLICY, quiet, fleet(ready=6), NOW, LastActions(up_at=NOW - 600))
    assert after_up.action == "hold"


def test_min_and_max_replicas_are_enforced_at_once():
    grow = decide(
        replace(POLICY, min_replicas=4), [], fleet(ready=1), NOW, LastActions(up_at=NOW - 1)
    )
    assert grow.action == "up" and grow.rule == "min_replicas" and grow.start == 3
    shrink = decide(
        replace(POLICY, max_replicas=2), history(0.5, 60), fleet(ready=4), NOW, LastActions()
    )
    assert shrink.action == "down" and shrink.rule == "max_replicas" and len(shrink.drain) == 2
    capped = decide(
        replace(POLICY, max_replicas=3), history(1.0, 60), fleet(ready=3), NOW, LastActions()
    )
    assert capped.action == "hold" and capped.rule == "at_max"


def test_replicas_still_starting_count_as_capacity_coming():
    decision = decide(
        POLICY, history(0.95, 120), fleet(ready=3, starting=2), NOW, LastActions(up_at=NOW - 90)
    )
    assert decision.action == "hold" and decision.rule == "capacity_starting"


def test_warm_replicas_are_promoted_before_anything_starts_and_the_pool_refills():
    policy = replace(POLICY, warm_pool=2)
    decision = decide(
        policy, history(0.95, 60, serving=3), fleet(ready=3, warm=2), NOW, LastActions()
    )
    assert decision.action == "up" and decision.to_replicas == 5
    assert decision.promote == (4, 5) and decision.start == 0  # both warm ones, instantly
    assert decision.start_warm == 2  # and the pool is topped up behind them
    draining_first = decide(
        policy, history(0.95, 60), fleet(ready=3, warm=2, draining=1), NOW, LastActions()
    )
    assert draining_first.promote[0] == 6  # a draining replica is put back before a warm one


def test_a_draining_replica_is_stopped_only_when_idle_in_a_scrape_after_the_drain():
    busy = WorkerState(id=1, state=DRAINING, in_flight=3, since=NOW - 60, observed_at=NOW)
    stale = WorkerState(id=2, state=DRAINING, in_flight=0, since=NOW - 1, observed_at=NOW - 5)
    idle = WorkerState(id=3, state=DRAINING, in_flight=0, since=NOW - 60, observed_at=NOW)
    loading = WorkerState(id=4, state=STARTING, in_flight=0, healthy=False)
    state = FleetState(
        workers=(busy, stale, idle, loading, WorkerState(id=5, state=READY, in_flight=4))
    )
    decision = decide(POLICY, history(0.5, 60, serving=2), state, NOW, LastActions())
    assert decision.stop == (3,) and decision.action == "drain"


def test_scale_down_never_picks_a_loading_or_unmanaged_replica():
    workers = (
        WorkerState(id=1, state=STARTING, healthy=False),
        WorkerState(id=2, state=READY, in_flight=9, managed=False),
        WorkerState(id=3, state=READY, in_flight=1),
        WorkerState(id=4, state=READY, in_flight=0),
    )
    decision = decide(
        POLICY, history(0.05, 900, serving=4), FleetState(workers=workers), NOW, LastActions()
    )
    assert set(decision.drain) <= {3, 4} and decision.drain[0] == 4


worker_states = st.builds(
    WorkerState,
    id=st.integers(1, 10_000),
    state=st.sampled_from([READY, STARTING, WARM, DRAINING]),
    in_flight=st.sampled_from([0.0, 0.0, 1.0, 7.0]),
    healthy=st.booleans(),
    since=st.floats(NOW - 3600, NOW),
    observed_at=st.floats(NOW - 3600, NOW),
    managed=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(
    workers=st.lists(worker_states, max_size=12, unique_by=lambda w: w.id),
    utilisation=st.floats(0, 1),
    seconds=st.sampled_from([0, 60, 900, 1200]),
    warm_pool=st.integers(0, 3),
)
def test_no_decision_stops_a_loading_or_busy_replica(workers, utilisation, seconds, warm_pool):
    policy = replace(POLICY, warm_pool=warm_pool, min_replicas=0)
    samples = history(utilisation, seconds) if seconds else []
    decision = decide(policy, samples, FleetState(workers=tuple(workers)), NOW, LastActions())
    by_id = {w.id: w for w in workers}
    for worker_id in decision.stop:
        worker = by_id[worker_id]
        assert worker.managed and worker.healthy and worker.in_flight == 0
        assert worker.state == WARM or drained(worker)
    for worker_id in decision.drain:
        assert by_id[worker_id].state == READY and by_id[worker_id].managed
    assert not set(decision.stop) & set(decision.promote)


# spot


@pytest.mark.django_db
def test_spot_capacity_is_refused_outside_the_batch_tier():
    small = ModelDeployment.objects.create(name="chat", tier="small")
    policy = AutoscalePolicy(deployment=small, allow_spot=True)
    with pytest.raises(ValidationError, match="batch tier"):
        policy.full_clean()
    batch = ModelDeployment.objects.create(name="nightly", tier="batch")
    AutoscalePolicy(deployment=batch, allow_spot=True).full_clean()
    # a row that slipped through (the tier changed later) still never gets spot replicas
    for tier, spot in (("small", False), ("batch", True)):
        spec = replace(POLICY, allow_spot=True, tier=tier)
        assert decide(spec, history(0.95, 60), fleet(), NOW, LastActions()).spot is spot


@pytest.mark.django_db
def test_thresholds_that_would_oscillate_are_refused():
    deployment = ModelDeployment.objects.create(name="chat")
    with pytest.raises(ValidationError, match="strictly between"):
        AutoscalePolicy(deployment=deployment, target_utilisation=0.9).full_clean()
    with pytest.raises(ValidationError, match="at least min_replicas"):
        AutoscalePolicy(deployment=deployment, min_replicas=5, max_replicas=2).full_clean()


# forecast


def test_forecast_ignores_noise_and_follows_a_real_trend():
    rng = random.Random(7)
    flat = [
        Sample(at=NOW - 15 * i, utilisation=0.5, queue=0, demand=500 + rng.gauss(0, 20))
        for i in range(60, -1, -1)
    ]
    level, trend = level_and_trend(flat, NOW, 300)
    assert trend == 0 and abs(level - 500) < 15
    ramp = [
        Sample(at=NOW - 15 * i, utilisation=0.5, queue=0, demand=500 + 2 * (900 - 15 * i))
        for i in range(60, -1, -1)
    ]
    forecast = Forecaster(periods=()).forecast(ramp, {}, NOW, 180)
    assert forecast.trend_per_s == pytest.approx(2.0)
    assert forecast.value == pytest.approx(2300 + 360)


def test_forecast_applies_yesterdays_rise_to_todays_level():
    day = 86_400
    then = bucket_start(NOW - day, 300)
    # yesterday, demand doubled two buckets after this time of day
    buckets = {then + k * 300: 100.0 if k < 2 else 200.0 for k in range(-10, 10)}
    recent = [
        Sample(at=NOW - 15 * i, utilisation=0.5, queue=0, demand=150.0) for i in range(60, -1, -1)
    ]
    forecast = Forecaster(periods=(day,)).forecast(recent, buckets, NOW, 900)
    assert forecast.seasonal_ratio == pytest.approx(201 / 101, rel=0.01)
    assert forecast.value == pytest.approx(150 * 201 / 101, rel=0.01)
    assert "yesterday" in forecast.explanation


# over simulated time


def _demand(rates: list[float]) -> Demand:
    return Demand(rate=rates, output_tokens=[200.0] * len(rates))


@pytest.mark.parametrize("mode", ["reactive", "predictive"])
def test_no_flapping_under_noisy_load_around_the_scale_up_threshold(mode):
    """Six hours of load whose mean sits at 80% of ten replicas, with seeded noise on
    every minute (+-8%): at most one step each way, and never up-down-up."""
    rng = random.Random(42)
    mean_rps = 0.8 * 10 * 64 / (0.25 + 200 * 0.015)
    rates = [mean_rps * (1 + rng.gauss(0, 0.08)) for _ in range(6 * 60) for _ in range(60)]
    policy = PolicySpec(min_replicas=1, max_replicas=50, mode=mode, ttft_p99_target_s=1.0)
    controller = AutoscalerController(policy)
    result = replay(_demand(rates), FleetModel(), controller, policy, seed=1)
    steps = [e["action"] for e in result.events if e["action"] in ("up", "down")]
    assert steps.count("up") <= 1 and steps.count("down") <= 1, result.events
    assert "up,down,up" not in ",".join(steps)
    assert result.attainment > 0.99


def test_predictive_starts_capacity_a_startup_ahead_of_a_seasonal_ramp_where_reactive_lags():
    """A 2-hour 'day' repeated three times (the forecaster's season set to it, so the test
    runs in a second): each day demand rises tenfold within ten minutes. Predictive has
    the capacity ready as the ramp arrives; reactive starts it after the fact."""
    period, startup = 7200, 300

    def rate(t: int) -> float:
        phase = t % period
        return 20.0 + 180.0 * min(max((phase - 3600) / 600, 0.0), 1.0)

    demand = _demand([rate(t) for t in range(3 * period)])
    base = PolicySpec(
        min_replicas=1, max_replicas=100, startup_time_s=startup, ttft_p99_target_s=1.0
    )
    model = FleetModel(startup_time_s=startup)
    forecaster = Forecaster(periods=(period,), bucket_s=60)
    results = {}
    for mode in ("reactive", "predictive"):
        controller = AutoscalerController(replace(base, mode=mode), forecaster=forecaster)
        results[mode] = replay(demand, model, controller, base, measure_from_s=2 * period)

    def short_minutes(result):
        """Minutes of the last day's ramp when ready replicas could not hold the load."""
        ramp = range(2 * period + 3600, 2 * period + 3600 + 600 + startup)
        return sum(
            1
            for t, _, ready in result.timeline
            if int(t) in ramp and ready * 64 < demand.in_flight(int(t), 0.25, 0.015)
        )

    assert short_minutes(results["predictive"]) == 0
    assert short_minutes(results["reactive"]) >= startup / 60  # a start-up time behind
    assert results["predictive"].attainment >= 0.99 > results["reactive"].attainment
    assert results["predictive"].gpu_hours < results["reactive"].gpu_hours


def test_shipped_traces_load():
    for name in ("steady", "diurnal", "spike", "multitenant"):
        demand = load_trace(trace_path(name))
        assert demand.seconds >= 3 * 3600 and demand.meta["trace"] == name
    tenants = load_trace(trace_path("multitenant")).tenants
    assert set(tenants) == {"acme", "globex", "initech"}
