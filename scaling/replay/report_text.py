"""A simulated-time replay's report: as text, one row per controller, or as JSON.

Kept apart from the command so the same rows serve the text report, the --json output
and the live replay's (model) rows; the command only writes them out.
"""

from typing import Any

from scaling.autoscale.types import PolicySpec
from scaling.replay.analytical_fleet import FleetModel
from scaling.replay.simulated import ReplayResult
from scaling.replay.traces import Demand


def simulated_report(
    demand: Demand,
    policy: PolicySpec,
    model: FleetModel,
    measure_s: float,
    results: list[ReplayResult],
    events: int,
) -> list[str]:
    """The trace and fleet, a row per controller (GPU-hours against the oracle's), then
    the first `events` scaling events of each."""
    hours = demand.seconds / 3600
    lines = [
        f"trace {demand.meta.get('trace', '?')}: {hours:.1f} h, "
        f"{sum(demand.rate):,.0f} requests expected; measured from "
        f"{measure_s / 3600:g} h",
        f"simulated time, analytical fleet: {model.slots_per_replica} slots "
        f"per replica, start-up {model.startup_time_s:g} s, TTFT target "
        f"{model.ttft_target_s:g} s, warm pool {policy.warm_pool}",
    ]
    oracle = next((r for r in results if r.name == "oracle"), None)
    lines.append(
        f"{'controller':<11} {'requests':>11} {'in SLO':>8} {'GPU-h':>9} "
        f"{'x oracle':>8} {'cost':>10} {'ups':>4} {'downs':>5} "
        f"{'rev<30m':>7}"
    )
    for r in results:
        ratio = f"{r.gpu_hours / oracle.gpu_hours:.2f}" if oracle and oracle.gpu_hours else "-"
        lines.append(
            f"{r.name:<11} {r.requests:>11,.0f} {r.attainment:>8.2%} "
            f"{r.gpu_hours:>9,.1f} {ratio:>8} {r.cost:>10,.0f} "
            f"{r.count('up'):>4} {r.count('down'):>5} "
            f"{r.reversals:>7}"
        )
    for r in results if events else []:
        lines.append(f"\n{r.name}: first {events} scaling events")
        for e in r.events[:events]:
            lines.append(
                f"  {e['t'] / 3600:7.2f} h {e['action']:<4} "
                f"{e['from']:>4} -> {e['to']:<4} {e['rule']}"
            )
    return lines


def result_as_dict(result: ReplayResult) -> dict[str, Any]:
    """One controller's figures for --json."""
    return {
        "controller": result.name,
        "requests": result.requests,
        "attainment": result.attainment,
        "gpu_hours": result.gpu_hours,
        "cost": result.cost,
        "ups": result.count("up"),
        "downs": result.count("down"),
        "reversals_30m": result.reversals,
        "events": result.events,
    }
