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


def local_vllm() -> bool:
    """AUTOSCALE_LOCAL_VLLM=0: this host starts no vLLM replica (`make run` sets it when
    SLUICE_EMBEDDED_WORKER=0)."""
    return setting("AUTOSCALE_LOCAL_VLLM", "1").strip().lower() not in ("0", "false", "no")


def actuator_from_settings(kind: str | None = None, sim_profile: str | None = None) -> Actuator:
    """AUTOSCALE_ACTUATOR=local (AUTOSCALE_SIM_PROFILE, AUTOSCALE_LOCAL_VLLM) or kubernetes
    (AUTOSCALE_K8S_NAMESPACE, AUTOSCALE_K8S_NAME, AUTOSCALE_K8S_PORT).

    What a local replica runs is its deployment's worker_kind (vLLM, or the simulator for a
    deployment marked simulated), never a setting: AUTOSCALE_LOCAL_WORKER is not read."""
    kind = kind or setting("AUTOSCALE_ACTUATOR", "local")
    if kind == "local":
        profile = sim_profile or setting("AUTOSCALE_SIM_PROFILE", "h100-llama3-8b")
        return build_actuator("local", sim_profile=profile, vllm=local_vllm())
    return build_actuator(
        kind,
        namespace=setting("AUTOSCALE_K8S_NAMESPACE", "sluice"),
        name_template=setting("AUTOSCALE_K8S_NAME", "vllm-{name}"),
        port=int(setting("AUTOSCALE_K8S_PORT", "8000")),
    )
