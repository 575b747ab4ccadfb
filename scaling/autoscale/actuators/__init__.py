"""Actuators: the autoscaler's hands. `local` runs processes on this host, `kubernetes`
scales a Deployment through the scale subresource."""

from typing import Any

from scaling.autoscale.actuators.base import Actuator, ActuatorError, Replica

__all__ = ["Actuator", "ActuatorError", "Replica", "build_actuator"]


def build_actuator(kind: str, **options: Any) -> Actuator:
    """`local` or `kubernetes`; options go to the actuator's constructor."""
    if kind == "local":
        from scaling.autoscale.actuators.local import LocalProcessActuator

        return LocalProcessActuator(**options)
    if kind == "kubernetes":
        from scaling.autoscale.actuators.kubernetes import KubernetesActuator

        return KubernetesActuator(**options)
    raise ValueError(f"unknown actuator {kind!r}: use local or kubernetes")
