"""The loop's knobs, from Django settings (gateway/settings.py reads them from the
environment); a test may leave one undefined, and then the environment or the default
shown applies."""

import os

from django.conf import settings

from scaling.autoscale.actuators import Actuator, build_actuator


def setting(name: str, default: str) -> str:
    value = getattr(settings, name, None)
    return str(value) if value not in (None, "") else os.environ.get(name, default)


def tick_seconds() -> float:
    return float(setting("AUTOSCALE_TICK_S", "15"))


def actuator_from_settings(kind: str | None = None) -> Actuator:
    """AUTOSCALE_ACTUATOR=local (AUTOSCALE_LOCAL_WORKER=sim|vllm, AUTOSCALE_SIM_PROFILE)
    or kubernetes (AUTOSCALE_K8S_NAMESPACE, AUTOSCALE_K8S_NAME, AUTOSCALE_K8S_PORT)."""
    kind = kind or setting("AUTOSCALE_ACTUATOR", "local")
    if kind == "local":
        profile = setting("AUTOSCALE_SIM_PROFILE", "h100-llama3-8b")
        worker = setting("AUTOSCALE_LOCAL_WORKER", "sim")
        return build_actuator("local", worker=worker, sim_profile=profile)
    return build_actuator(
        kind,
        namespace=setting("AUTOSCALE_K8S_NAMESPACE", "sluice"),
        name_template=setting("AUTOSCALE_K8S_NAME", "vllm-{name}"),
        port=int(setting("AUTOSCALE_K8S_PORT", "8000")),
    )
