"""A live replay's report as text: what was run and scaled, then one row per controller.

Kept apart from the command so the lines can be read (and tested) without a terminal;
the command only writes them out.
"""

from scaling.autoscale.types import PolicySpec
from scaling.replay.live.clock import TimeScale
from scaling.replay.live.options import FIXED, LiveOptions
from scaling.replay.live.report import LiveResult
from scaling.replay.simulated import ReplayResult
from scaling.replay.traces import Demand


def live_header(
    trace: Demand,
    demand: Demand,
    policy: PolicySpec,
    live: LiveOptions,
    pools: list[str] | None = None,
) -> list[str]:
    """What will run: the window, the rate scale, what is real and what is scaled, and the
    warm pool variants each controller runs with (pools, when given)."""
    scale, rate = TimeScale(live.speed), live.rate_scale or 1.0
    wall = (live.lead_in_s + demand.seconds) / live.speed
    worker = (
        f"fixed latency: first chunk after {live.worker_ttft_s * 1000:g} ms, then "
        f"{live.tokens - 1} more {live.worker_itl_s * 1000:.0f} ms apart = a "
        f"{live.output_tokens:.0f}-token request at {live.per_token_s * 1000:g} "
        f"ms/token, {live.service_s:.2f} s"
        if live.worker == FIXED
        else f"profile {live.worker}"
    )
    runs = f"per controller and pool ({len(pools)} pools)" if pools else "per controller"
    sleeps = "asleep" in (pools or []) or policy.warm_sleeps
    pool = (
        f"warm pools {', '.join(pools)} (cold: none; warm/asleep: "
        f"{max(policy.warm_pool, 1)} replica(s), awake / in sleep mode)"
        if pools
        else f"warm pool {policy.warm_pool}" + (" asleep" if policy.warm_sleeps else "")
    )
    return [
        f"trace {trace.meta.get('trace', '?')}: live replay of trace seconds "
        f"{live.start_s:g}-{live.start_s + demand.seconds:g} ({demand.seconds / 3600:.2f} h) "
        f"at speed {live.speed:g}: about {wall:.0f} s of wall time {runs}",
        f"rate x{rate:.3g}: trace peak {max(demand.rate):,.0f} req/s -> "
        f"{max(demand.rate) * rate:.1f} req/s; mean {sum(demand.rate) / demand.seconds:,.0f}"
        f" -> {sum(demand.rate) / demand.seconds * rate:.1f} req/s",
        f"real: simulator processes ({worker}; {policy.slots_per_replica} slots each in "
        f"the dispatcher), scraper, AutoscaleLoop, "
        f"decide(), LocalProcessActuator, Dispatcher + stream_completion; replicas "
        f"{policy.min_replicas}-{policy.max_replicas}, {pool}, "
        f"TTFT target {live.ttft_target_s:g} s (wall)",
        f"scaled by 1/{live.speed:g}: {scale.describe(policy)}"
        + (f", wake from sleep {live.wake_time_s:g}->{live.worker_wake_s:.3g} s" if sleeps else ""),
    ]


def live_report(results: list[LiveResult], models: list[ReplayResult], events: int) -> list[str]:
    """The live rows and the model's rows in one table, then each live run's details and
    its first `events` scaling decisions."""
    oracle = next((m.gpu_hours for m in models if m.name.startswith("oracle")), 0.0)

    def ratio(gpu_hours: float) -> str:
        return f"{gpu_hours / oracle:.2f}" if oracle else "-"

    # Runs that slept get two more columns: GPU-hours without the hours asleep.
    slept = any(r.asleep_seconds > 0 for r in results)
    width = max([19, *(len(r.replay.name) for r in results), *(len(m.name) for m in models)])

    def awake(gpu_hours: float | None) -> str:
        if not slept:
            return ""
        if gpu_hours is None:
            return f" {'-':>7} {'-':>8}"
        return f" {gpu_hours:>7.2f} {ratio(gpu_hours):>8}"

    lines = [
        f"{'controller':<{width}} {'requests':>9} {'in SLO':>8} {'errors':>6} "
        f"{'TTFT P50':>8} {'P99':>6} {'GPU-h':>8} {'x oracle':>8}"
        + (f" {'awake-h':>7} {'x oracle':>8}" if slept else "")
        + f" {'cost':>9} {'ups':>4} {'downs':>5} {'rev<30m':>7} {'peak':>4}"
    ]
    for r in results:
        p50, p99 = _seconds(r.ttft_p50_s), _seconds(r.ttft_p99_s)
        lines.append(
            f"{r.replay.name:<{width}} {r.replay.requests:>9,.0f} "
            f"{r.replay.attainment:>8.2%} {sum(r.errors.values()):>6} {p50:>8} {p99:>6} "
            f"{r.replay.gpu_hours:>8.2f} {ratio(r.replay.gpu_hours):>8}"
            + awake(r.awake_gpu_hours)
            + f" {r.replay.cost:>9,.2f} {r.replay.count('up'):>4} "
            f"{r.replay.count('down'):>5} {r.replay.reversals:>7} {r.peak_serving:>4}"
        )
    for m in models:
        peak = max((serving for _, serving, _ in m.timeline), default=0)
        lines.append(
            f"{m.name:<{width}} {m.requests:>9,.0f} {m.attainment:>8.2%} {'-':>6} {'-':>8} "
            f"{'-':>6} {m.gpu_hours:>8.2f} {ratio(m.gpu_hours):>8}"
            + awake(None)
            + f" {m.cost:>9,.2f} {m.count('up'):>4} {m.count('down'):>5} "
            f"{m.reversals:>7} {peak:>4}"
        )
    lines.append(
        "GPU-h: replica-seconds on the wall clock x speed (trace hours of the "
        "scaled fleet), asleep or not: a sleeping replica keeps its GPU. "
        + (
            "awake-h: the same without the hours in sleep mode (its GPU memory free). "
            if slept
            else ""
        )
        + "(model) rows: the simulated-time replay of the same "
        "scaled load; it counts requests per trace second, the live rows per "
        "wall second."
    )
    for r in results:
        startup = r.startup_s
        lines.append(
            f"{r.replay.name.removesuffix(' (live)')}: {r.sent} sent, {r.measured} measured, "
            f"errors {r.errors or 0}, "
            f"{r.replica_seconds:.1f} replica-seconds in {r.wall_s:.0f} s wall, "
            f"{len(r.replicas)} processes started, start-up measured "
            + (f"{min(startup):.1f}-{max(startup):.1f} s wall" if startup else "-")
            + f", driver lag P99 {r.driver_lag_p99_s * 1000:.0f} ms"
            + (
                f", {r.asleep_seconds:.1f} of them asleep, {len(r.wakes_s)} wakes "
                f"({min(r.wakes_s):.2f}-{max(r.wakes_s):.2f} s wall)"
                if r.wakes_s
                else (f", {r.asleep_seconds:.1f} of them asleep" if r.asleep_seconds else "")
            )
            + (f", {r.tick_errors} failed ticks" if r.tick_errors else "")
        )
        for d in [d for d in r.decisions if d["action"] != "hold"][:events]:
            lines.append(
                f"  {d['t'] / 3600:7.3f} h {d['action']:<5} "
                f"{d['from']:>2} -> {d['to']:<2} {d['rule']}: {d['reason']}"
            )
    return lines


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
