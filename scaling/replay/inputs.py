"""What a replay runs with when it replays a deployment: its policy, its price, and the
span of the trace that counts.

The replay command may take a deployment's AutoscalePolicy and GPU price from the database
instead of its own arguments, so a replay answers "what would this deployment's policy
have done"; these look-ups, and the errors they end in, are the same with or without --live.
"""

from inference.models import ModelDeployment
from scaling.autoscale.record import policy_spec
from scaling.autoscale.types import PolicySpec
from scaling.models import AutoscalePolicy
from scaling.replay.traces import Demand


class ReplayInputError(ValueError):
    """A replay was asked for something that does not exist (a deployment, its policy, a
    controller)."""


def deployment_policy(name: str) -> PolicySpec:
    """The deployment's AutoscalePolicy as a PolicySpec."""
    row = AutoscalePolicy.objects.select_related("deployment").filter(deployment__name=name).first()
    if row is None:
        known = ModelDeployment.objects.filter(name=name).exists()
        raise ReplayInputError(
            f"{name} has no AutoscalePolicy" if known else f"no deployment {name}"
        )
    return policy_spec(row)


def gpu_cost(deployment: str | None, default: float) -> float:
    """The deployment's own price when replaying its policy and it has one."""
    if deployment:
        row = ModelDeployment.objects.filter(name=deployment).first()
        if row is not None and row.gpu_cost_per_hour > 0:
            return float(row.gpu_cost_per_hour)
    return float(default)


def measured_from_s(demand: Demand, hours: float | None) -> float:
    """Where measuring starts, in trace seconds: `hours` in, else past the first day of a
    trace of two days or more (so seasonality has a yesterday), else at once."""
    if hours is None:
        return 86_400.0 if demand.seconds >= 2 * 86_400 else 0.0
    return hours * 3600
