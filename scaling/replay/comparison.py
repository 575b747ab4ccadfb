"""Every controller over one trace in simulated time: the oracle, reactive and predictive.

The same trace, analytical fleet and policy under each controller make their SLO
attainment and GPU-hours comparable; the oracle, which knows the future, is the yardstick
the real autoscaler's GPU-hours are measured against.
"""

from dataclasses import replace

from scaling.autoscale.types import PolicySpec
from scaling.replay.analytical_fleet import FleetModel
from scaling.replay.inputs import ReplayInputError
from scaling.replay.simulated import (
    AutoscalerController,
    Controller,
    OracleController,
    ReplayResult,
    replay,
)
from scaling.replay.traces import Demand

MODES = ("oracle", "reactive", "predictive")


def controller_for(mode: str, policy: PolicySpec, demand: Demand, model: FleetModel) -> Controller:
    """The oracle, or the real autoscaler in the given mode."""
    if mode == "oracle":
        return OracleController(policy, demand, model)
    if mode in ("reactive", "predictive"):
        return AutoscalerController(replace(policy, mode=mode))
    raise ReplayInputError(f"unknown mode {mode!r}: use {', '.join(MODES)}")


def compare(
    demand: Demand,
    model: FleetModel,
    policy: PolicySpec,
    modes: list[str],
    *,
    seed: int,
    measure_from_s: float,
) -> list[ReplayResult]:
    """One replay per mode, in order (an unknown mode fails when its turn comes)."""
    return [
        replay(
            demand,
            model,
            controller_for(mode, policy, demand, model),
            policy,
            seed=seed,
            measure_from_s=measure_from_s,
        )
        for mode in modes
    ]
