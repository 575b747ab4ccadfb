"""What the simulated-time replay predicts for a live run, to print beside the live rows.

The analytical fleet model is what every simulated replay trusts; running it on exactly
the load a live run sent (the same window, rate scale and request length) shows how far
the model and the real processes, scraper and loop agree.
"""

from scaling.autoscale.types import PolicySpec
from scaling.replay.analytical_fleet import FleetModel
from scaling.replay.live.options import LiveOptions
from scaling.replay.simulated import (
    AutoscalerController,
    Controller,
    OracleController,
    ReplayResult,
    replay,
)
from scaling.replay.traces import Demand


def predicted(demand: Demand, policy: PolicySpec, live: LiveOptions) -> ReplayResult:
    """The analytical replay of the same scaled load (rate x rate_scale, the live
    request's service time), in trace time with the unscaled policy: what the
    simulated-time replay predicts for this live run."""
    scale = live.rate_scale or 1.0
    scaled = Demand(
        rate=[r * scale for r in demand.rate],
        output_tokens=[live.output_tokens] * demand.seconds,
        meta=demand.meta,
    )
    model = FleetModel(
        slots_per_replica=policy.slots_per_replica,
        base_ttft_s=live.worker_ttft_s,
        per_token_s=live.per_token_s,
        startup_time_s=policy.startup_time_s,
        gpu_cost_per_hour=live.gpu_cost_per_hour,
        ttft_target_s=live.ttft_target_s,
    )
    controller: Controller = (
        OracleController(policy, scaled, model)
        if policy.mode == "oracle"
        else AutoscalerController(policy)
    )
    result = replay(scaled, model, controller, policy, seed=live.seed)
    result.name = f"{policy.mode} (model)"
    return result
