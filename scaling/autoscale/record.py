"""Between the database and the pure decision: policy rows -> PolicySpec, the last scaling
steps -> LastActions, and decisions -> ScalingDecision rows (the dashboard's diary)."""

from datetime import UTC, datetime, timedelta

from inference.models import ModelDeployment
from scaling.autoscale.types import Decision, LastActions, PolicySpec
from scaling.models import AutoscalePolicy, ScalingDecision

HOLD_EVERY_S = 300.0  # an unchanged "hold" is recorded at most this often


def policy_spec(policy: AutoscalePolicy) -> PolicySpec:
    deployment = policy.deployment
    return PolicySpec(
        min_replicas=policy.min_replicas,
        max_replicas=policy.max_replicas,
        warm_pool=policy.warm_pool,
        warm_sleeps=policy.warm_pool_sleeps,
        target_utilisation=policy.target_utilisation,
        scale_up_utilisation=policy.scale_up_utilisation,
        scale_up_queue=policy.scale_up_queue,
        ttft_p99_target_s=policy.ttft_p99_target_s,
        scale_up_window_s=float(policy.scale_up_window_s),
        scale_down_utilisation=policy.scale_down_utilisation,
        scale_down_window_s=float(policy.scale_down_window_s),
        scale_up_cooldown_s=float(policy.scale_up_cooldown_s),
        scale_down_cooldown_s=float(policy.scale_down_cooldown_s),
        startup_time_s=float(policy.startup_time_s),
        mode=policy.mode,
        allow_spot=policy.allow_spot,
        tier=deployment.tier,
        slots_per_replica=deployment.max_in_flight_per_worker,
    )


def last_actions(deployment: ModelDeployment) -> LastActions:
    """When the last actuated step up and step down happened (for cooldowns)."""

    def latest(action: str) -> float | None:
        row = (
            ScalingDecision.objects.filter(deployment=deployment, action=action, actuated=True)
            .order_by("-at")
            .values_list("at", flat=True)
            .first()
        )
        return row.timestamp() if row else None

    return LastActions(up_at=latest("up"), down_at=latest("down"))


def utc(now: float) -> datetime:
    return datetime.fromtimestamp(now, tz=UTC)


def record(
    deployment: ModelDeployment,
    decision: Decision,
    now: float,
    actuated: bool = False,
    error: str = "",
) -> ScalingDecision | None:
    """Store the decision; a hold repeating the last recorded rule is kept only every
    HOLD_EVERY_S, so the diary shows changes, not 5,760 identical rows a day. So is a step
    the actuator failed with the same error as the last row (a vLLM that cannot start
    would otherwise add a row every tick)."""
    hold, failed = decision.action == "hold", bool(error) and not actuated
    if hold or failed:
        last = (
            ScalingDecision.objects.filter(deployment=deployment)
            .order_by("-at")
            .values_list("action", "rule", "error", "at")
            .first()
        )
        same = last is not None and (
            last[1] == decision.rule
            if hold
            else last[:3] == (decision.action, decision.rule, error)
        )
        if same and last is not None and last[3] > utc(now) - timedelta(seconds=HOLD_EVERY_S):
            return None
    ops = {
        "promote": list(decision.promote),
        "start": decision.start,
        "start_warm": decision.start_warm,
        "drain": list(decision.drain),
        "stop": list(decision.stop),
        "to_warm": list(decision.to_warm),
        "wake": list(decision.wake),
        "sleep": list(decision.sleep),
        "spot": decision.spot,
    }
    return ScalingDecision.objects.create(
        deployment=deployment,
        at=utc(now),
        action=decision.action,
        rule=decision.rule,
        from_replicas=decision.from_replicas,
        to_replicas=decision.to_replicas,
        reason=decision.reason,
        inputs={**decision.inputs, "ops": ops},
        actuated=actuated,
        error=error,
    )
